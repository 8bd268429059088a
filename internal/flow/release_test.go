package flow

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
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

// A process that dies in the middle of a run's start, after it removed
// one of the run's waiting records and before the other, leaves nothing
// that another process's passes do not clear: once the run has ended, no
// flow record is left.
func TestAStartCutShortLeavesNothingBehind(t *testing.T) {
	ctx := t.Context()
	st := memory.New()
	var (
		mu      sync.Mutex
		started = map[string]int{} // starts by run
		ended   = map[string]bool{}
	)
	env := func(s store.Store) Env {
		return Env{
			Store: s,
			State: func(_ context.Context, runID string) (bool, bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return started[runID] > 0, ended[runID], nil
			},
			Cancel: func(context.Context, string, string) error { return nil },
		}
	}
	inner := func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		defer mu.Unlock()
		started[m.Metadata.RunID]++
		return nil
	}
	decode := func(m *calf.Message) (Input, error) {
		return Input{Kind: "agent", Name: "a", RunID: m.Metadata.RunID}, nil
	}
	dying := &dyingStore{Store: st}
	first, err := New("agent", "a", Policy{Concurrency: 1}, env(dying), inner, decode)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New("agent", "a", Policy{Concurrency: 1}, env(st), inner, decode)
	if err != nil {
		t.Fatal(err)
	}
	msg := &calf.Message{ID: "r1.input", Channel: "calf.agent.a.input", Key: "r1", Metadata: calf.Metadata{RunID: "r1", Time: time.Now()}}
	// The first process starts r1 and dies after its first removal.
	if err := first.Handle(ctx, msg); !errors.Is(err, errDead) {
		t.Fatalf("the first process's handling of r1: %v; want it dead", err)
	}
	// The other one's passes, while r1 runs and once it has ended.
	if err := second.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ended["r1"] = true
	mu.Unlock()
	// The first pass after the end may hand the input left waiting on
	// again, which takes a slot; the next frees it.
	for range 2 {
		if err := second.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{KindWait, KindRun, KindActive, KindKey} {
		recs, err := st.List(ctx, kind, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			t.Errorf("left: %s %s %s", kind, r.ID, r.Data)
		}
	}
}

var errDead = errors.New("the process is dead")

// dyingStore is the store of a process that dies right after it removed
// its first waiting record (of KindWait or KindRun): every later call
// fails.
type dyingStore struct {
	store.Store
	mu   sync.Mutex
	dead bool
}

func (s *dyingStore) alive() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errDead
	}
	return nil
}

func (s *dyingStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.alive(); err != nil {
		return store.Record{}, err
	}
	return s.Store.Get(ctx, kind, id)
}

func (s *dyingStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	return s.Store.Put(ctx, kind, id, data, version)
}

func (s *dyingStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, kind, prefix, after, limit)
}

func (s *dyingStore) Delete(ctx context.Context, kind, id string, version int64) error {
	if err := s.alive(); err != nil {
		return err
	}
	if kind == KindWait || kind == KindRun {
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
	}
	return s.Store.Delete(ctx, kind, id, version)
}

// The same across keys: a pass that frees the runner's slots
// (Policy.MaxRunning) keeps the one of a run another process starts
// between its two looks, and a run of another key waits for it.
func TestReleaseTotalKeepsTheSlotOfARunStartedMeanwhile(t *testing.T) {
	ctx := t.Context()
	st := memory.New()
	var (
		mu      sync.Mutex
		started = map[string]bool{}
		fail    = true
		armed   bool
		handled []string
	)
	startElsewhere := func() {
		started["r1"] = true
		for _, kind := range []string{KindWait, KindOrder} {
			recs, err := st.List(ctx, kind, "", "", 0)
			if err != nil {
				t.Error(err)
			}
			for _, r := range recs {
				_ = st.Delete(ctx, kind, r.ID, 0)
			}
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
	// A key per run: only the bound across keys holds r2.
	policy := Policy{MaxRunning: 1, Key: func(in Input) string { return in.RunID }}
	g, err := New("agent", "a", policy, env, inner, decode)
	if err != nil {
		t.Fatal(err)
	}
	input := func(run string) *calf.Message {
		return &calf.Message{ID: run + ".input", Channel: "calf.agent.a.input", Key: run,
			Metadata: calf.Metadata{RunID: run, Time: time.Now()}}
	}
	running := func() []string {
		rec, err := st.Get(ctx, KindTotal, "agent/a")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var ts totalState
		if err := json.Unmarshal(rec.Data, &ts); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(ts.Running))
	}
	// r1 takes the runner's slot, and its start fails.
	if err := g.Handle(ctx, input("r1")); err != nil {
		t.Fatal(err)
	}
	if err := g.Pass(ctx); err == nil {
		t.Fatal("the first start of r1 did not fail")
	}
	if got := running(); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("the runner's runs after r1's failed start: %v", got)
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := g.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := running(); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("the runner's runs after the pass: %v; want r1 holding its slot", got)
	}
	// r2, of another key, waits for the slot r1 holds.
	if err := g.Handle(ctx, input("r2")); err != nil {
		t.Fatal(err)
	}
	if err := g.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 0 {
		t.Errorf("runs started while r1 runs under a bound of 1 across keys: %v", handled)
	}
}
