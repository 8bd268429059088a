package sessionstore

import (
	"testing"

	"github.com/calf-go/calf/model"
)

func msgs(texts ...string) []model.Message {
	var out []model.Message
	for _, t := range texts {
		out = append(out, model.Message{Role: model.RoleUser, Parts: []model.Part{model.TextPart(t)}})
	}
	return out
}

// The session cache holds at most its number of sessions and its size,
// evicting the sessions used least recently, skips a session larger than
// its size, moves an entry only from the record it was cached at.
func TestCacheBounds(t *testing.T) {
	c := newCache(2, 100)
	c.set("a", []byte("ra"), msgs("a1"), 40)
	c.set("b", []byte("rb"), msgs("b1"), 40)
	if _, ok := c.messages("a", []byte("ra")); !ok {
		t.Fatal("a is not cached")
	}
	c.set("c", []byte("rc"), msgs("c1"), 40) // over both bounds: b, used least recently, goes
	if _, ok := c.messages("b", []byte("rb")); ok {
		t.Error("b is still cached: the session used least recently was not the one evicted")
	}
	if c.entries.Len() != 2 || c.entries.Cost() != 80 {
		t.Fatalf("%d entries of %d bytes, want 2 of 80", c.entries.Len(), c.entries.Cost())
	}
	if _, ok := c.messages("c", []byte("rc")); !ok {
		t.Error("the last session set is not cached")
	}
	c.set("big", []byte("r"), msgs("x"), 101)
	if _, ok := c.messages("big", []byte("r")); ok || c.entries.Cost() > 100 {
		t.Errorf("a session over the size bound is cached (size %d)", c.entries.Cost())
	}
	if _, ok := c.messages("c", []byte("other")); ok {
		t.Error("messages of another record returned")
	}

	c = newCache(10, 1000)
	c.set("s", []byte("r1"), msgs("one"), 10)
	c.moved("s", []byte("r1"), []byte("r2"), msgs("two"), 10)
	got, ok := c.messages("s", []byte("r2"))
	if !ok || len(got) != 2 || got[1].Text() != "two" || c.entries.Cost() != 20 {
		t.Fatalf("after a move: %v %v, size %d", got, ok, c.entries.Cost())
	}
	if _, ok := c.messages("s", []byte("r1")); ok {
		t.Error("the record before the move still matches")
	}
	c.moved("s", []byte("r1"), []byte("r3"), nil, 0) // not from the cached record
	if _, ok := c.messages("s", []byte("r3")); ok || c.entries.Len() != 0 || c.entries.Cost() != 0 {
		t.Errorf("a move from another record kept the entry (size %d)", c.entries.Cost())
	}
	c.moved("gone", []byte("x"), []byte("y"), msgs("z"), 1)
	if c.entries.Len() != 0 {
		t.Error("a move of an uncached session cached it")
	}
}
