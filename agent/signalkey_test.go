package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store/sqlite"
)

// A caller sends the same signal under one idempotency key five times,
// the last two after the process restarted on the same store: it is
// delivered once (one signal recorded; the run's second wait gets
// nothing); another signal under the key is refused; once the window
// has passed, the key sends the signal again, which the second wait
// takes; sent again after the run ended, it is no error, while a new
// signal under a new key is refused each time it is sent.
func TestSignalIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var offset atomic.Int64 // the clock, moved by hand
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var steps atomic.Int64
	process := func() (*agent.Custom[struct{}, string], *agent.Runtime, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		ctx, cancel := context.WithCancel(t.Context())
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: now, IdempotencyWindow: time.Hour})
		gate, err := agent.NewCustom("gate", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
			steps.Add(1)
			var a, b string
			if _, err := sc.WaitSignal("open", 0, &a); err != nil {
				return "", err
			}
			if _, err := sc.WaitSignal("open", 0, &b); err != nil {
				return "", err
			}
			return a + " " + b, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := gate.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		return gate, rt, func() { cancel(); _ = c.Close(); _ = b.Close(); _ = st.Close() }
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	gate, rt, stop := process()
	defer func() { stop() }()
	if _, err := gate.Submit(ctx, rt, "wait", &agent.RunOptions{RunID: "g-1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the step to wait", func() bool { return steps.Load() > 0 })
	ref := agent.RunRef{Name: "gate", RunID: "g-1"}
	key := &agent.SignalOptions{IdempotencyKey: "k-1"}
	sent := func() int {
		recs, err := rt.Store().List(ctx, "signal", "agent/gate/g-1/open/", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	for i := range 5 {
		if i == 3 {
			// The step took the first signal and waits for the second
			// before the restart: an in-memory broker loses the
			// messages it holds.
			// (The step may have taken the first signal in its first
			// run, if it was sent before that run's first wait: what
			// tells is the second wait's record, not the runs counted.)
			testwait.For(t, 10*time.Second, "the step to wait again", func() bool {
				calls, err := rt.Store().List(ctx, "signal_call", "agent/gate/g-1/", "", 0)
				if err != nil || len(calls) != 2 {
					return false
				}
				recs, err := rt.Store().List(ctx, "signal_waiter", "agent/gate/g-1/", "", 0)
				return err == nil && len(recs) == 1
			})
			stop()
			gate, rt, stop = process()
		}
		v, err := rt.SignalWith(ctx, ref, "open", "one", key)
		if err != nil || v.Ref().RunID != "g-1" {
			t.Fatalf("send %d: %v, %v", i+1, v, err)
		}
	}
	if n := sent(); n != 1 {
		t.Errorf("%d signals recorded for five sends under one key, want 1", n)
	}
	if _, err := rt.SignalWith(ctx, ref, "open", "two", key); !errors.Is(err, agent.ErrIdempotencyConflict) {
		t.Errorf("another signal under the key: %v, want ErrIdempotencyConflict", err)
	}
	if v, err := rt.LoadRun(ctx, ref); err != nil || v.RunStatus().Terminal() {
		t.Fatalf("the run after one signal: %v, %v; want it waiting", v, err)
	}
	offset.Add(int64(2 * time.Hour)) // past the window: the key is free
	if _, err := rt.SignalWith(ctx, ref, "open", "one", key); err != nil {
		t.Fatal(err)
	}
	out, err := gate.Wait(ctx, rt, "g-1")
	if err != nil || out.Output != "one one" {
		t.Fatalf("output %+v, %v; want %q", out, err, "one one")
	}
	if n := sent(); n != 2 {
		t.Errorf("%d signals recorded, want 2", n)
	}
	if _, err := rt.SignalWith(ctx, ref, "open", "one", key); err != nil {
		t.Errorf("the delivered signal sent again after the run ended: %v, want none", err)
	}
	if _, err := rt.Signal(ctx, ref, "open", "one"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("a signal without a key to the ended run: %v, want ErrRunEnded", err)
	}
	// Refused by the ended run, a signal leaves its key unused: sent
	// again, it is refused again, not taken for delivered.
	for i := range 2 {
		if _, err := rt.SignalWith(ctx, ref, "open", "late", &agent.SignalOptions{IdempotencyKey: "k-late"}); !errors.Is(err, agent.ErrRunEnded) {
			t.Errorf("a keyed signal to the ended run (%d): %v, want ErrRunEnded", i+1, err)
		}
	}
}
