package nats

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/internal/timers"
	storemem "github.com/calf-go/calf/store/memory"
)

// Subscribed is true once a consumer of the stream matches the channel:
// a named group's (read at once after this broker subscribes) or a
// private one's.
func TestSubscribed(t *testing.T) {
	b := openExternal(t, testOptions())
	if b.Subscribed("t.fired") {
		t.Fatal("subscribed with no consumer in the stream")
	}
	subscribe(t, b, "t.*", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if !b.Subscribed("t.fired") {
		t.Error("not subscribed to t.fired once group g subscribes to t.*")
	}
	if b.Subscribed("u.fired") {
		t.Error("subscribed to u.fired, which no consumer matches")
	}
	subscribe(t, b, "u.>", func(context.Context, *calf.Message) error { return nil }, nil)
	if !b.Subscribed("u.fired.again") {
		t.Error("not subscribed to u.fired.again once a private subscription to u.> is made")
	}
}

// Two deployments share a store but not a stream (another stream and
// prefix on the same server): the firing loop of the one whose stream
// nobody consumes the timer's channel from leaves the timer, which the
// other fires into its stream, where its group gets it. Without the
// check, the first fired it into its own stream, which dropped the
// event (interest-based retention), and removed the timer: the event was
// lost.
func TestTimerNotFiredIntoAStreamNobodyReads(t *testing.T) {
	ctx := t.Context()
	st := storemem.New()
	t.Cleanup(func() { _ = st.Close() })
	other := openExternal(t, testOptions())
	ours := openExternal(t, testOptions())
	got := make(chan string, 2)
	subscribe(t, ours, "t.fired", func(_ context.Context, m *calf.Message) error { got <- m.ID; return nil }, &calf.SubscribeOptions{Group: "firing"})

	oc := calf.NewClient(ours, nil)
	t.Cleanup(func() { _ = oc.Close() })
	xc := calf.NewClient(other, nil)
	t.Cleanup(func() { _ = xc.Close() })
	due := time.Now()
	if _, err := timers.New(st, oc, timers.Options{}).Start(ctx, timers.Timer{ID: "wake", Due: due, Channel: "t.fired", Key: "run1"}); err != nil {
		t.Fatal(err)
	}
	n, _, err := timers.New(st, xc, timers.Options{Owner: "other"}).Fire(ctx)
	if err != nil || n != 0 {
		t.Fatalf("the other deployment fired %d timers (%v); want 0: nobody reads the channel from its stream", n, err)
	}
	n, _, err = timers.New(st, oc, timers.Options{Owner: "ours"}).Fire(ctx)
	if err != nil || n != 1 {
		t.Fatalf("ours fired %d timers (%v); want 1", n, err)
	}
	testwait.For(t, timeout, "the timer's event", func() bool { return len(got) == 1 })
	if id := <-got; id != "wake" {
		t.Errorf("event %q, want wake", id)
	}
}
