package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

func TestGroupMembers(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
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
	h := func(context.Context, *calf.Message) error { return nil }
	s1, err := b.Subscribe(t.Context(), "a.b", h, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Subscribe(t.Context(), "a.b", h, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	waitCount := func(want int) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		n := count()
		for n != want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			n = count()
		}
		if n != want {
			t.Fatalf("members = %d, want %d", n, want)
		}
	}
	waitCount(2)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	waitCount(1)
}
