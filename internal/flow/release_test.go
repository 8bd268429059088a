package flow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
)

// A pass that looks at an admitted run just before another process
// starts it (its State read says the run has no record yet) and at its
// waiting records just after (the start removed them) keeps the run's
// slot: the run has started and holds it until it ends. A later run of
// the key waits.
func TestReleaseKeepsTheSlotOfARunStartedMeanwhile(t *testing.T) {
	ctx := t.Context()
	st := memory.New()
	var (
		mu      sync.Mutex
		started = map[string]bool{} // the runs with a record
		fail    = true              // the first start fails
		armed   bool                // the next State read of r1 races its start
		handled []string
	)
	// startElsewhere is another process's start of r1 (see Gate.start):
	// the run's record, then its waiting records gone.
	startElsewhere := func() {
		started["r1"] = true
		recs, err := st.List(ctx, KindWait, "", "", 0)
		if err != nil {
			t.Error(err)
		}
		for _, r := range recs {
			_ = st.Delete(ctx, KindWait, r.ID, 0)
		}
		_ = st.Delete(ctx, KindRun, "r1", 0)
	}
	env := Env{
		Store: st,
		State: func(_ context.Context, runID string) (bool, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			exists := started[runID]
			if runID == "r1" && armed {
				armed = false
				startElsewhere()
			}
			return exists, false, nil
		},
		Cancel: func(context.Context, string, string) error { return nil },
	}
	inner := func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("not now")
		}
		started[m.Metadata.RunID] = true
		handled = append(handled, m.Metadata.RunID)
		return nil
	}
	decode := func(m *calf.Message) (Input, error) {
		return Input{Kind: "agent", Name: "a", RunID: m.Metadata.RunID}, nil
	}
	g, err := New("agent", "a", Policy{Concurrency: 1}, env, inner, decode)
	if err != nil {
		t.Fatal(err)
	}
	input := func(run string) *calf.Message {
		return &calf.Message{ID: run + ".input", Channel: "calf.agent.a.input", Key: run,
			Metadata: calf.Metadata{RunID: run, Time: time.Now()}}
	}
	// r1 is admitted, and its start fails: it holds the slot, and waits.
	if err := g.Handle(ctx, input("r1")); err == nil {
		t.Fatal("the first start of r1 did not fail")
	}
	if s, err := g.Stats(ctx, Input{}); err != nil || s.Running != 1 || s.Waiting != 1 {
		t.Fatalf("after r1's failed start: %+v, %v; want 1 running, 1 waiting", s, err)
	}
	// A pass reads r1's state, then another process starts it, then the
	// pass reads whether it waits.
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := g.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := g.Stats(ctx, Input{}); err != nil || s.Running != 1 {
		t.Fatalf("after the pass: %+v, %v; want r1 holding its slot", s, err)
	}
	// r2 waits for the slot r1 holds.
	if err := g.Handle(ctx, input("r2")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 0 {
		t.Errorf("runs started while r1 runs under a concurrency of 1: %v", handled)
	}
	if _, err := st.Get(ctx, KindRun, "r2"); errors.Is(err, store.ErrNotFound) {
		t.Errorf("r2 does not wait")
	}
}
