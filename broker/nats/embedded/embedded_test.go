package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats/embedded"
)

func TestOpenNeedsDirectory(t *testing.T) {
	if _, err := embedded.Open(t.Context(), "", nil); err == nil {
		t.Error("Open without a directory succeeded")
	}
}

// TestCloseStopsServer checks that Close shuts the server down, so that
// the directory opens again, with the messages a group had not handled.
func TestCloseStopsServer(t *testing.T) {
	dir := t.TempDir()
	b, err := embedded.Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(t.Context(), "e.x", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(t.Context(), &calf.Message{ID: "m1", Channel: "e.x", Data: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Server().Running() {
		t.Fatal("the server runs after Close")
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}

	b, err = embedded.Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan string, 1)
	if _, err := b.Subscribe(t.Context(), "e.x", func(_ context.Context, m *calf.Message) error {
		got <- m.ID
		return nil
	}, &calf.SubscribeOptions{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "m1" {
			t.Errorf("got %s, want m1", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message published before the restart was not delivered")
	}
}
