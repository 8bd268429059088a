package storetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/storetest"
)

func newFaulty(t *testing.T, f storetest.Faults) (*storetest.FaultyStore, store.Store) {
	t.Helper()
	inner := memory.New()
	s := storetest.WithFaults(inner, f)
	t.Cleanup(func() { _ = s.Close() })
	if s.Unwrap() != inner {
		t.Fatal("Unwrap does not return the wrapped store")
	}
	return s, inner
}

func get(t *testing.T, s store.Store, kind, id string) store.Record {
	t.Helper()
	rec, err := s.Get(t.Context(), kind, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", kind, id, err)
	}
	return rec
}

// Without faults the wrapper keeps the contract.
func TestFaultyStoreWithoutFaultsIsConformant(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := storetest.WithFaults(memory.New(), storetest.Faults{Seed: 1})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestInjectChosenCalls(t *testing.T) {
	var seen []storetest.Call
	s, inner := newFaulty(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		seen = append(seen, c)
		if c.Op == storetest.OpPut && c.N == 2 {
			return storetest.Fail
		}
		if c.Op == storetest.OpGet && c.N == 1 {
			return storetest.Fail
		}
		return storetest.NoFault
	}})
	ctx := t.Context()
	v, err := s.Put(ctx, "k", "a", []byte("1"), 0)
	if err != nil || v != 1 {
		t.Fatalf("first Put = %d, %v", v, err)
	}
	if _, err := s.Put(ctx, "k", "a", []byte("2"), 1); !errors.Is(err, storetest.ErrInjected) || errors.Is(err, store.ErrConflict) {
		t.Fatalf("second Put = %v, want ErrInjected alone", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 1 || string(rec.Data) != "1" {
		t.Errorf("a failed Put wrote: %+v", rec)
	}
	if _, err := s.Get(ctx, "k", "a"); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("first Get = %v, want ErrInjected", err)
	}
	if rec := get(t, s, "k", "a"); string(rec.Data) != "1" {
		t.Errorf("second Get = %+v", rec)
	}
	if v, err := s.Put(ctx, "k", "a", []byte("3"), 1); err != nil || v != 2 {
		t.Errorf("third Put = %d, %v", v, err)
	}
	want := []storetest.Call{
		{Op: storetest.OpPut, Kind: "k", ID: "a", N: 1},
		{Op: storetest.OpPut, Kind: "k", ID: "a", Version: 1, N: 2},
		{Op: storetest.OpGet, Kind: "k", ID: "a", N: 1},
		{Op: storetest.OpGet, Kind: "k", ID: "a", N: 2},
		{Op: storetest.OpPut, Kind: "k", ID: "a", Version: 1, N: 3},
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("calls seen by Inject (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st != (storetest.FaultStats{Fails: 2}) {
		t.Errorf("stats = %+v", st)
	}
}

func always(f storetest.Fault) func(storetest.Call) storetest.Fault {
	return func(storetest.Call) storetest.Fault { return f }
}

func TestLostReplyWrites(t *testing.T) {
	s, inner := newFaulty(t, storetest.Faults{Inject: always(storetest.LostReply)})
	if _, err := s.Put(t.Context(), "k", "a", []byte("x"), 0); !errors.Is(err, storetest.ErrInjected) {
		t.Fatalf("Put = %v, want ErrInjected", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 1 || string(rec.Data) != "x" {
		t.Errorf("the write did not land: %+v", rec)
	}
	// A write that would have failed anyway reports its own error.
	if _, err := s.Put(t.Context(), "k", "a", []byte("y"), 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("conflicting Put = %v, want ErrConflict", err)
	}
	if err := s.Delete(t.Context(), "k", "a", 1); !errors.Is(err, storetest.ErrInjected) {
		t.Fatalf("Delete = %v, want ErrInjected", err)
	}
	if _, err := inner.Get(t.Context(), "k", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the delete did not land: %v", err)
	}
	if _, err := s.Get(t.Context(), "k", "a"); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("Get = %v, want ErrInjected", err)
	}
	if st := s.Stats(); st.LostReplies != 2 || st.Fails != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestInjectedConflict(t *testing.T) {
	s, inner := newFaulty(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op == storetest.OpPut && c.Version == 1 {
			return storetest.Conflict
		}
		return storetest.NoFault
	}})
	if _, err := s.Put(t.Context(), "k", "a", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "k", "a", []byte("y"), 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put = %v, want ErrConflict", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 1 || string(rec.Data) != "x" {
		t.Errorf("an injected conflict wrote: %+v", rec)
	}
	if st := s.Stats(); st.Conflicts != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestConcurrentWrite(t *testing.T) {
	s, inner := newFaulty(t, storetest.Faults{Inject: always(storetest.ConcurrentWrite)})
	ctx := t.Context()
	// A create races a duplicate of itself, which wins.
	if _, err := s.Put(ctx, "k", "a", []byte("x"), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create = %v, want ErrConflict", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 1 || string(rec.Data) != "x" {
		t.Errorf("after the racing create: %+v", rec)
	}
	// An update races a writer that bumps the version.
	if _, err := s.Put(ctx, "k", "a", []byte("y"), 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update = %v, want ErrConflict", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 2 || string(rec.Data) != "x" {
		t.Errorf("after the racing update: %+v", rec)
	}
	if err := s.Delete(ctx, "k", "a", 2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete = %v, want ErrConflict", err)
	}
	if rec := get(t, inner, "k", "a"); rec.Version != 3 {
		t.Errorf("after the racing delete: %+v", rec)
	}
	// An unconditional delete still deletes.
	if err := s.Delete(ctx, "k", "a", 0); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.ConcurrentWrites != 4 {
		t.Errorf("stats = %+v", st)
	}
}

// store.Update gets through a store where most updates race another
// writer, and the result is the one the caller computed.
func TestUpdateSurvivesConcurrentWrites(t *testing.T) {
	s, inner := newFaulty(t, storetest.Faults{Seed: 7, ConcurrentWriteRate: 0.5, ConflictRate: 0.2})
	// Created beforehand: a racing create would write data of its own.
	if _, err := inner.Put(t.Context(), "k", "n", nil, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		_, err := store.Update(t.Context(), s, "k", "n", func(data []byte, exists bool) ([]byte, error) {
			return append(data, byte('a'+i%26)), nil
		})
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if rec := get(t, inner, "k", "n"); len(rec.Data) != 50 {
		t.Errorf("%d updates recorded, want 50", len(rec.Data))
	}
	if st := s.Stats(); st.ConcurrentWrites == 0 || st.Conflicts == 0 {
		t.Errorf("no faults injected: %+v", st)
	}
}

// outcomes does n Puts and reports which failed.
func outcomes(t *testing.T, f storetest.Faults, n int) []bool {
	s, _ := newFaulty(t, f)
	out := make([]bool, n)
	for i := range out {
		_, err := s.Put(t.Context(), "k", "a", []byte("x"), int64(i))
		if err != nil && !errors.Is(err, storetest.ErrInjected) {
			t.Fatal(err)
		}
		if err != nil {
			// Keep the versions in step: write what failed.
			if _, err := s.Unwrap().Put(t.Context(), "k", "a", []byte("x"), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		out[i] = err != nil
	}
	return out
}

func TestRatesAreSeeded(t *testing.T) {
	f := storetest.Faults{Seed: 42, WriteFailRate: 0.3}
	a, b := outcomes(t, f, 1000), outcomes(t, f, 1000)
	if !cmp.Equal(a, b) {
		t.Error("the same seed gave different failures")
	}
	f.Seed = 43
	if cmp.Equal(a, outcomes(t, f, 1000)) {
		t.Error("another seed gave the same failures")
	}
	n := 0
	for _, failed := range a {
		if failed {
			n++
		}
	}
	if n < 200 || n > 400 {
		t.Errorf("%d of 1000 writes failed at rate 0.3", n)
	}
}

func TestReadFailRateAndKinds(t *testing.T) {
	s, inner := newFaulty(t, storetest.Faults{ReadFailRate: 1, WriteFailRate: 1, Kinds: []string{"bad"}})
	ctx := t.Context()
	if _, err := s.Put(ctx, "good", "a", []byte("x"), 0); err != nil {
		t.Fatalf("Put of a spared kind: %v", err)
	}
	if _, err := s.Get(ctx, "good", "a"); err != nil {
		t.Fatalf("Get of a spared kind: %v", err)
	}
	if _, err := inner.Put(ctx, "bad", "a", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "bad", "a"); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("Get = %v, want ErrInjected", err)
	}
	if _, err := s.List(ctx, "bad", "", "", 0); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("List = %v, want ErrInjected", err)
	}
	if err := s.Delete(ctx, "bad", "a", 0); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("Delete = %v, want ErrInjected", err)
	}
	s.SetEnabled(false)
	if recs, err := s.List(ctx, "bad", "", "", 0); err != nil || len(recs) != 1 {
		t.Errorf("List with faults off = %v, %v", recs, err)
	}
	s.SetEnabled(true)
	if _, err := s.Get(ctx, "bad", "a"); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("Get with faults on again = %v, want ErrInjected", err)
	}
}

// A slow read gives up when its context ends.
func TestReadDelayStopsOnCancel(t *testing.T) {
	s, _ := newFaulty(t, storetest.Faults{ReadDelay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, "k", "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want context.Canceled", err)
	}
	if _, err := s.List(ctx, "k", "", "", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v, want context.Canceled", err)
	}
	if st := s.Stats(); st.Delayed != 2 {
		t.Errorf("stats = %+v", st)
	}
}

func TestFaultString(t *testing.T) {
	for f, want := range map[storetest.Fault]string{
		storetest.NoFault: "no fault", storetest.Fail: "fail", storetest.LostReply: "lost reply",
		storetest.Conflict: "conflict", storetest.ConcurrentWrite: "concurrent write", storetest.Fault(9): "Fault(9)",
	} {
		if got := f.String(); got != want {
			t.Errorf("Fault(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}
