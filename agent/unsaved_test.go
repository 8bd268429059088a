package agent

import (
	"strconv"
	"testing"
)

func TestUnsavedResults(t *testing.T) {
	u := newUnsavedResults()
	u.keep("r/c1", unsavedResult{ev: ToolResultEvent{ToolCallID: "c1"}, data: []byte("x")})
	r, ok := u.take("r/c1")
	if !ok || r.ev.ToolCallID != "c1" || string(r.data) != "x" {
		t.Fatalf("take = %+v, %v", r, ok)
	}
	if _, ok := u.take("r/c1"); ok {
		t.Error("a result was taken twice")
	}
	for i := range maxUnsavedResults + 10 {
		u.keep(strconv.Itoa(i), unsavedResult{})
	}
	if n := u.results.Len(); n != maxUnsavedResults {
		t.Errorf("%d results kept, want the bound %d", n, maxUnsavedResults)
	}
	// The oldest went, the newest stayed.
	if _, ok := u.take("0"); ok {
		t.Error("the oldest result was kept past the bound")
	}
	if _, ok := u.take(strconv.Itoa(maxUnsavedResults + 9)); !ok {
		t.Error("the newest result was dropped")
	}
	var none *unsavedResults
	none.keep("k", unsavedResult{})
	if _, ok := none.take("k"); ok {
		t.Error("a nil *unsavedResults kept a result")
	}
}
