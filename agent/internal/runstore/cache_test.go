package runstore

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// testState stands for the engine's run state: a value behind a pointer,
// with a slice that a copy must not share.
type testState struct {
	ID    string   `json:"id"`
	Step  int      `json:"step"`
	Items []string `json:"items"`
}

func decodeTestState(data []byte) (*testState, error) {
	var s testState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	if s.ID == "" {
		return nil, errors.New("no id")
	}
	return &s, nil
}

func cloneTestState(s *testState) *testState {
	c := *s
	c.Items = slices.Clone(s.Items)
	return &c
}

func encodeTestState(t *testing.T, s *testState) []byte {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCache(t *testing.T) {
	c := NewCache(2, 0, decodeTestState, cloneTestState)
	st := &testState{ID: "r", Step: 1, Items: []string{"a"}}
	data := encodeTestState(t, st)
	c.Put("r", data, 3, st)

	// A hit returns a copy: changing it leaves the cached state alone.
	got, err := c.Decode("r", data, 3)
	if err != nil {
		t.Fatal(err)
	}
	got.Items[0] = "changed"
	again, err := c.Decode("r", data, 3)
	if err != nil {
		t.Fatal(err)
	}
	if again.Items[0] != "a" {
		t.Fatalf("the cached state was changed through a copy: %+v", again)
	}
	// Other bytes for the same run are decoded, never served from the cache.
	st2 := *st
	st2.Step = 7
	data2 := encodeTestState(t, &st2)
	fresh, err := c.Decode("r", data2, 0)
	if err != nil || fresh.Step != 7 {
		t.Fatalf("decode of new bytes: %+v, %v", fresh, err)
	}
	// Decoding without a version keeps the cache as it was.
	if latest, rec, ok := c.Latest("r"); !ok || rec.Version != 3 || latest.Step != 1 || string(rec.Data) != string(data) {
		t.Fatalf("latest after decoding other bytes without a version: %+v, %+v, %v", latest, rec, ok)
	}
	// Latest returns a copy too.
	latest, _, _ := c.Latest("r")
	latest.Items[0] = "changed"
	if again, _, _ := c.Latest("r"); again.Items[0] != "a" {
		t.Fatal("the cached state was changed through a copy from Latest")
	}
	// LatestIf copies only a state that satisfies its condition.
	if _, _, ok := c.LatestIf("r", func(s *testState) bool { return s.Step == 2 }); ok {
		t.Fatal("LatestIf returned a state that does not satisfy its condition")
	}
	// An earlier version does not replace a later one; a later one does.
	c.Put("r", data2, 2, &st2)
	if _, rec, _ := c.Latest("r"); rec.Version != 3 {
		t.Fatalf("version 2 replaced version 3: latest is at %d", rec.Version)
	}
	if _, err := c.Decode("r", data2, 4); err != nil {
		t.Fatal(err)
	}
	if latest, rec, _ := c.Latest("r"); rec.Version != 4 || latest.Step != 7 {
		t.Fatalf("after decoding version 4: latest %+v at %d", latest, rec.Version)
	}
	if rec, ok := c.Record("r"); !ok || rec.Version != 4 || rec.ID != "r" {
		t.Fatalf("Record: %+v, %v", rec, ok)
	}
	// Bad bytes are an error even for a cached run.
	if _, err := c.Decode("r", []byte("{"), 5); err == nil {
		t.Fatal("corrupt bytes decoded")
	}
	// The cache stays within its size, evicting the run used least
	// recently.
	for _, id := range []string{"x", "y", "z"} {
		s := *st
		s.ID = id
		c.Put(id, encodeTestState(t, &s), 1, &s)
		if id == "y" {
			c.Latest("x") // x used after y: y goes when z comes
		}
	}
	if n := c.entries.Len(); n > 2 {
		t.Fatalf("cache holds %d entries, max 2", n)
	}
	if _, _, ok := c.Latest("y"); ok {
		t.Error("y is still cached: the run used least recently was not the one evicted")
	}
	if _, _, ok := c.Latest("x"); !ok {
		t.Error("x, used after y, was evicted")
	}
	c.Forget("x")
	if _, ok := c.Record("x"); ok {
		t.Error("x is still cached after Forget")
	}
}

// Only a run created here (PutBorn) has calls known unrecorded, until a
// result is recorded for them; a later Put of the run keeps what is known.
func TestCacheBorn(t *testing.T) {
	c := NewCache(8, 0, decodeTestState, cloneTestState)
	st := &testState{ID: "r", Step: 1}
	data := encodeTestState(t, st)
	c.Put("r", data, 1, st)
	if c.Unrecorded("r", "c1") {
		t.Fatal("a run not created here has a call known unrecorded")
	}
	c.PutBorn("b", data, 1, st)
	if !c.Unrecorded("b", "c1") {
		t.Fatal("a call of a run created here is not known unrecorded")
	}
	c.RecordedResult("b", "c1")
	c.Put("b", data, 2, st)
	if c.Unrecorded("b", "c1") || !c.Unrecorded("b", "c2") {
		t.Fatalf("after a result of c1: c1 unrecorded %v, c2 unrecorded %v", c.Unrecorded("b", "c1"), c.Unrecorded("b", "c2"))
	}
}

// The cache keeps at most its bound of stored bytes: the least recently
// used runs go first, and a state whose bytes alone are over the bound is
// not kept.
func TestCacheBytes(t *testing.T) {
	st := &testState{ID: "r", Step: 1, Items: []string{"a"}}
	data := encodeTestState(t, st)
	c := NewCache(8, 2*len(data), decodeTestState, cloneTestState)
	c.Put("r1", data, 1, st)
	c.Put("r2", data, 1, st)
	c.Put("r3", data, 1, st)
	if _, ok := c.Record("r1"); ok {
		t.Error("r1 is kept past the bound on bytes")
	}
	for _, id := range []string{"r2", "r3"} {
		if _, ok := c.Record(id); !ok {
			t.Errorf("%s is not kept", id)
		}
	}
	big := &testState{ID: "big", Items: []string{strings.Repeat("x", 2*len(data))}}
	c.Put("big", encodeTestState(t, big), 1, big)
	if _, ok := c.Record("big"); ok {
		t.Error("a state over the bound on bytes is kept")
	}
	if _, ok := c.Record("r3"); !ok {
		t.Error("a state over the bound evicted r3")
	}
}
