package nats

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/calf-go/calf"
)

func TestGroupMembers(t *testing.T) {
	b, srv, err := openOnServer(t.Context(), t.TempDir(), &Options{Partitions: 2})
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
	if n := count(); n != 1 {
		t.Fatalf("a group with one member has %d", n)
	}
	// A second member, in another broker (another process), counts too.
	nc, err := natsgo.Connect("", natsgo.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := open(t.Context(), nc, withDefaults(&Options{Partitions: 2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	sub2, err := b2.Subscribe(t.Context(), "a.b", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n != 2 {
		t.Fatalf("a group with two members has %d", n)
	}
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
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
