package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// A message reaches every group before any consequence of it: a handler in
// one group that publishes a follow-up with the same key cannot overtake the
// original in another group (an observer sees cause before effect).
func TestCauseBeforeEffectAcrossGroups(t *testing.T) {
	b := newBroker(t, nil)
	ctx := t.Context()
	const n = 300
	if _, err := b.Subscribe(ctx, "c.cause", func(ctx context.Context, m *calf.Message) error {
		return b.Publish(ctx, &calf.Message{ID: m.ID + ".effect", Channel: "c.effect", Key: m.Key})
	}, &calf.SubscribeOptions{Group: "worker"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	done := make(chan struct{})
	if _, err := b.Subscribe(ctx, "c.>", func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen[m.Key] = append(seen[m.Key], m.Channel)
		if len(seen) == n && complete(seen) {
			close(done)
		}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Publish(ctx, &calf.Message{ID: fmt.Sprint(i), Channel: "c.cause", Key: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer did not see every message")
	}
	mu.Lock()
	defer mu.Unlock()
	for k, chans := range seen {
		if chans[0] != "c.cause" || chans[1] != "c.effect" {
			t.Errorf("key %s: observer saw %v", k, chans)
		}
	}
}

func complete(seen map[string][]string) bool {
	for _, c := range seen {
		if len(c) < 2 {
			return false
		}
	}
	return true
}
