package reactive_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/reactive"
	storemem "github.com/calf-go/calf/store/memory"
)

type tally struct {
	Ticks int `json:"ticks"`
	Count int `json:"count"`
	Other int `json:"other"`
}

// A change delivered again runs the rules again, but each of their
// dispatches takes effect once: on a state kept in the process and on a
// persisted one, with a dispatch after one that fails.
func TestRuleDispatchesOnceOnRedelivery(t *testing.T) {
	for _, persisted := range []bool{false, true} {
		t.Run(map[bool]string{false: "in process", true: "persisted"}[persisted], func(t *testing.T) {
			// Every delivery calls the handler three times.
			mb := memory.New(nil)
			b := brokertest.DuplicateDeliveries(mb, 3)
			c := calf.NewClient(b, nil)
			st := storemem.New()
			t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
			var failOther atomic.Int64
			failOther.Store(2) // the second dispatch fails twice, then works
			a := &reactive.Actions[tally]{}
			reactive.MustAction(a, "tick", func(s tally, _ struct{}) (tally, []string, error) {
				s.Ticks++
				return s, []string{"ticks"}, nil
			})
			reactive.MustAction(a, "add", func(s tally, n int) (tally, []string, error) {
				s.Count += n
				return s, []string{"count"}, nil
			})
			reactive.MustAction(a, "other", func(s tally, _ struct{}) (tally, []string, error) {
				if failOther.Add(-1) >= 0 {
					return s, nil, calf.Unavailable(errors.New("down for a moment"))
				}
				s.Other++
				return s, []string{"other"}, nil
			})
			opts := &reactive.Options{Client: c}
			if persisted {
				opts.State = st
			}
			s, err := reactive.NewStore("tally", tally{}, a, opts)
			if err != nil {
				t.Fatal(err)
			}
			rule := func(_ tally, d *reactive.Delta) []reactive.Dispatch {
				if d.Action != "tick" {
					return nil
				}
				return []reactive.Dispatch{{Action: "add", Payload: 1}, {Action: "other", Payload: struct{}{}}}
			}
			app, err := reactive.NewApp(s, nil, rule)
			if err != nil {
				t.Fatal(err)
			}
			if err := app.Serve(t.Context(), agent.NewRuntime(c, st, nil)); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := s.Dispatch(t.Context(), "tick", struct{}{}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			testwait.ForErr(t, 20*time.Second, "the rules to run", func() error {
				if err := s.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				if got := s.Get(); got.Other < 2 {
					return fmt.Errorf("state %+v", got)
				}
				return nil
			})
			// Deliveries still in progress would show once all are handled.
			if err := mb.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if got := s.Get(); got != (tally{Ticks: 2, Count: 2, Other: 2}) {
				t.Errorf("state %+v, want each rule's dispatch once per tick", got)
			}
		})
	}
}
