package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// testRun is a run state for the store's tests: a run at Step that waits
// for the results of its calls (Calls) while Waiting.
type testRun struct {
	ID      string       `json:"id"`
	Step    int          `json:"step"`
	Waiting bool         `json:"waiting"`
	Calls   []string     `json:"calls"`
	Results []testResult `json:"results,omitempty"`
}

type testResult struct {
	Step  int    `json:"step"`
	Call  string `json:"call"`
	Value string `json:"value"`
}

// testRuns is the engine's side of the store (Runs) for testRun.
type testRuns struct{}

func (testRuns) Decode(data []byte) (*testRun, error) {
	var r testRun
	if err := json.Unmarshal(data, &r); err != nil || r.ID == "" {
		return nil, records.ErrCorrupt
	}
	return &r, nil
}

func (testRuns) Clone(r *testRun) *testRun {
	c := *r
	c.Calls, c.Results = slices.Clip(r.Calls), slices.Clip(r.Results)
	return &c
}

func (testRuns) Encode(r *testRun) ([]byte, error)                { return json.Marshal(r) }
func (testRuns) ID(r *testRun) string                             { return r.ID }
func (testRuns) ReadBack(context.Context, *testRun) (bool, error) { return false, nil }
func (testRuns) Archive(context.Context, *testRun) error          { return nil }
func (testRuns) Call(res testResult) (int, string)                { return res.Step, res.Call }
func (testRuns) Due(r *testRun, step int) bool                    { return r.Step == step && !r.Waiting }
func (testRuns) Awaits(r *testRun, step int) bool                 { return r.Step == step && r.Waiting }
func (t testRuns) Answered(r *testRun, step int, call string) bool {
	_, ok := t.ResultFor(r, step, call)
	return ok
}

func (testRuns) ResultFor(r *testRun, step int, call string) (testResult, bool) {
	for _, res := range r.Results {
		if res.Step == step && res.Call == call {
			return res, true
		}
	}
	return testResult{}, false
}

// taker takes a result into a run that waits for it, and counts the
// results it took.
type taker struct{ took atomic.Int32 }

func (t *taker) TakeResult(r *testRun, res testResult) (bool, error) {
	if !slices.Contains(r.Calls, res.Call) {
		return false, nil
	}
	t.took.Add(1)
	r.Results = append(r.Results, res)
	return true, nil
}

// newTestStore returns a run store over a new memory store, with a run
// r1 created at step 1, waiting for the result of its call c1.
func newTestStore(t *testing.T, local bool) (*Store[*testRun, testResult], store.Store) {
	t.Helper()
	mem := storemem.New()
	t.Cleanup(func() { _ = mem.Close() })
	s := New[*testRun, testResult](mem, testRuns{}, local)
	err := s.Create(t.Context(), "r1", func(data []byte, exists bool) ([]byte, *testRun, error) {
		r := &testRun{ID: "r1", Step: 1, Waiting: true, Calls: []string{"c1"}}
		out, err := json.Marshal(r)
		return out, r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, mem
}

// On the shared store protocol, a tool's result is a record of its own,
// the first one recorded standing; on the local shortcut, the result of
// a call of a run created in the process goes into the run's record.
func TestToolResults(t *testing.T) {
	ctx := t.Context()
	for _, local := range []bool{false, true} {
		s, mem := newTestStore(t, local)
		if _, found, err := s.ToolResult(ctx, "r1", "c1"); found || err != nil {
			t.Fatalf("local %v: a result before any was recorded: %v, %v", local, found, err)
		}
		first := testResult{Step: 1, Call: "c1", Value: "first"}
		data, _ := json.Marshal(first)
		var tk taker
		got, err := s.RecordToolResult(ctx, "r1", first, data, &tk)
		if err != nil || got != first {
			t.Fatalf("local %v: recorded %+v, %v", local, got, err)
		}
		_, recErr := mem.Get(ctx, store.KindToolResult, "r1/c1")
		stored, err := s.Read(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if local {
			if !errors.Is(recErr, store.ErrNotFound) || tk.took.Load() != 1 || len(stored.Results) != 1 {
				t.Fatalf("local: record of its own %v, taken %d times, in the run %+v", recErr, tk.took.Load(), stored.Results)
			}
			if st, ok, err := s.Answered(ctx, "r1", first); !ok || err != nil || len(st.Results) != 1 {
				t.Fatalf("local: the cached run does not hold the result it took: %v, %v", ok, err)
			}
		} else if recErr != nil || tk.took.Load() != 0 || len(stored.Results) != 0 {
			t.Fatalf("stored: record of its own %v, taken %d times, in the run %+v", recErr, tk.took.Load(), stored.Results)
		}
		if local {
			continue // the handler finds a result its run holds before recording another
		}
		// A second delivery's result does not replace the first.
		second := testResult{Step: 1, Call: "c1", Value: "second"}
		data, _ = json.Marshal(second)
		if got, err := s.RecordToolResult(ctx, "r1", second, data, &tk); err != nil || got != first {
			t.Fatalf("stored: a second result recorded returned %+v, %v; want the first", got, err)
		}
		if got, found, err := s.ToolResult(ctx, "r1", "c1"); !found || err != nil || got != first {
			t.Fatalf("stored: result %+v, %v, %v", got, found, err)
		}
	}
}

// UpdateFrom writes a state loaded at a version without reading it again,
// and applies its update to the stored state when another writer wrote
// since.
func TestUpdateFrom(t *testing.T) {
	ctx := t.Context()
	s, mem := newTestStore(t, false)
	st, v, err := s.Load(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// Another writer moves the run on behind the store's back.
	rec, _ := mem.Get(ctx, store.KindRun, "r1")
	other := &testRun{ID: "r1", Step: 2, Calls: []string{"c2"}}
	data, _ := json.Marshal(other)
	if _, err := mem.Put(ctx, store.KindRun, "r1", data, rec.Version); err != nil {
		t.Fatal(err)
	}
	var applied int
	got, err := s.UpdateFrom(ctx, st, v, func(r *testRun) (bool, error) {
		applied++
		r.Waiting = false
		return true, nil
	})
	if err != nil || applied != 2 || got.Step != 2 || got.Waiting {
		t.Fatalf("UpdateFrom after a conflict: %+v, applied %d times, %v", got, applied, err)
	}
	if st, err := s.Read(ctx, "r1"); err != nil || st.Step != 2 || st.Waiting || s.Version("r1") != rec.Version+2 {
		t.Fatalf("stored %+v at %d, %v", st, s.Version("r1"), err)
	}
	// A missing run is a permanent error, for a handler.
	if _, _, err := s.Load(ctx, "nope"); !errors.Is(err, store.ErrNotFound) || !calf.IsPermanent(err) {
		t.Fatalf("Load of a missing run: %v", err)
	}
	if _, err := s.Update(ctx, "nope", func(*testRun) (bool, error) { return true, nil }); !errors.Is(err, store.ErrNotFound) || !calf.IsPermanent(err) {
		t.Fatalf("Update of a missing run: %v", err)
	}
}

// On the local shortcut, the model call of a run's step takes the cached
// state when it shows the call due, and reads the store otherwise.
func TestLoadStep(t *testing.T) {
	ctx := t.Context()
	s, mem := newTestStore(t, true)
	if _, err := s.Update(ctx, "r1", func(r *testRun) (bool, error) { r.Waiting = false; return true, nil }); err != nil {
		t.Fatal(err)
	}
	rec, _ := mem.Get(ctx, store.KindRun, "r1")
	if st, v, err := s.LoadStep(ctx, "r1", 1); err != nil || v != rec.Version || st.Waiting {
		t.Fatalf("LoadStep: %+v at %d, %v", st, v, err)
	}
	// Written elsewhere: the cached copy shows step 1, the store step 2.
	data, _ := json.Marshal(&testRun{ID: "r1", Step: 2})
	if _, err := mem.Put(ctx, store.KindRun, "r1", data, rec.Version); err != nil {
		t.Fatal(err)
	}
	if st, _, err := s.LoadStep(ctx, "r1", 2); err != nil || st.Step != 2 {
		t.Fatalf("LoadStep of a step the cache does not show: %+v, %v", st, err)
	}
}
