package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
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
		testwait.ForErr(t, timeout, fmt.Sprintf("%d members", want), func() error {
			if n := count(); n != want {
				return fmt.Errorf("members = %d", n)
			}
			return nil
		})
	}
	waitCount(2)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	waitCount(1)
}
