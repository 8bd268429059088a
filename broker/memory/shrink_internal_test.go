package memory

import (
	"context"
	"strconv"
	"testing"

	"github.com/calf-go/calf"
)

// A burst of messages on distinct keys (a run each) leaves the group's
// map of queues made again, small, once they are handled: a Go map keeps
// the room of its peak otherwise.
func TestKeysShrinkAfterBurst(t *testing.T) {
	const n = 3 * shrinkAt
	b := New(&Options{QueueSize: 2 * n})
	defer b.Close()
	ctx := context.Background()
	// The handlers wait until the whole burst is queued: the map holds
	// every key at once.
	gate := make(chan struct{})
	sub, err := b.Subscribe(ctx, "burst.>", func(context.Context, *calf.Message) error { <-gate; return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i := range n {
		if err := b.Publish(ctx, &calf.Message{ID: strconv.Itoa(i), Channel: "burst.x", Key: "run-" + strconv.Itoa(i), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	g := b.groups["g"]
	g.mu.Lock()
	peak := g.peak
	g.mu.Unlock()
	if peak < n/2 {
		t.Fatalf("the burst's peak was %d keys, want most of %d queued at once", peak, n)
	}
	close(gate)
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.keys) != 0 || g.peak >= shrinkAt {
		t.Errorf("after the burst: %d keys, peak %d; want none, and the map made again (peak under %d)", len(g.keys), g.peak, shrinkAt)
	}
}
