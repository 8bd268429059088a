package eventlog

import (
	"strconv"
	"testing"

	"github.com/calf-go/calf/internal/lru"
)

// TestHeadsForgetLeastRecentlyUsed checks that a process that appends to
// more logs than it remembers forgets the log it appended to least
// recently, not one in use.
func TestHeadsForgetLeastRecentlyUsed(t *testing.T) {
	l := &Log{heads: lru.New[string, *head](maxHeads, 0)}
	busy := l.head("busy")
	for i := range maxHeads + 10 {
		l.head("log-" + strconv.Itoa(i))
		if l.head("busy") != busy {
			t.Fatalf("after %d other logs, the head of a log in use was forgotten", i+1)
		}
	}
	if n := l.heads.Len(); n != maxHeads {
		t.Errorf("%d heads remembered, want the bound %d", n, maxHeads)
	}
	if _, ok := l.heads.Peek("log-0"); ok {
		t.Error("the log appended to least recently is still remembered")
	}
}
