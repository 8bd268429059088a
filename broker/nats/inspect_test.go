package nats

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

func TestGroupMembers(t *testing.T) {
	b, err := OpenEmbedded(t.Context(), t.TempDir(), &Options{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	count := func() int {
		t.Helper()
		n, err := b.GroupMembers(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("members of a group nobody joined: %d", n)
	}
	sub, err := b.Subscribe(t.Context(), "a.b", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n == 0 {
		t.Fatal("a subscribed group has no member")
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// The durable consumers stay; the closed member's pull requests end.
	deadline = time.Now().Add(15 * time.Second)
	for count() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Errorf("members after the only one left: %d", n)
	}
}
