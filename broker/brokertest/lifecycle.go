package brokertest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

// testSubscriptionClose checks that closing a subscription cancels its
// handler's context, waits for the handler to return, and ends delivery.
func testSubscriptionClose(e *env) {
	t := e.t
	ch := e.channel("close")
	started, ctxDone, releaseCh := make(chan struct{}), make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseCh) })
	var calls atomic.Int32
	var returned atomic.Bool
	sub := e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		if calls.Add(1) > 1 {
			return nil
		}
		close(started)
		select {
		case <-ctx.Done():
			close(ctxDone)
		case <-time.After(Timeout):
			t.Errorf("Close did not cancel the handler's context")
		}
		<-releaseCh
		returned.Store(true)
		return nil
	}, &calf.SubscribeOptions{Group: e.group("close")})
	witness := newCollector()
	e.subscribe(ch, witness.handle, nil)
	t.Cleanup(release) // before the subscriptions close

	e.publish(e.msg(ch, "k", e.id("0")))
	wait(t, "handler start", started)
	closed := make(chan error, 1)
	go func() {
		err := sub.Close()
		if err == nil && !returned.Load() {
			err = errors.New("subscription Close returned before its handler did")
		}
		closed <- err
	}()
	wait(t, "cancellation of the handler's context", ctxDone)
	release()
	if err := wait(t, "Close", closed); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		e.publish(e.msg(ch, "k", e.id(strconv.Itoa(i))))
	}
	witness.waitID(t, "other subscription", e.id("5"))
	if n := calls.Load(); n != 1 {
		t.Errorf("closed subscription's handler called %d times, want 1", n)
	}
}

// testBrokerClose checks that closing the broker cancels handlers, waits
// for them, and makes Publish fail with calf.ErrClosed.
func testBrokerClose(e *env) {
	t := e.t
	ch := e.channel("bclose")
	started := make(chan struct{})
	var returned, cancelled atomic.Bool
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		close(started)
		select {
		case <-ctx.Done():
			cancelled.Store(true)
		case <-time.After(Timeout):
		}
		returned.Store(true)
		return nil
	}, nil)
	e.publish(e.msg(ch, "k", e.id("0")))
	wait(t, "handler start", started)
	closed := make(chan error, 1)
	go func() {
		err := e.b.Close()
		if err == nil && !returned.Load() {
			err = errors.New("broker Close returned before the handler did")
		}
		closed <- err
	}()
	if err := wait(t, "broker Close", closed); err != nil {
		t.Fatal(err)
	}
	if !cancelled.Load() {
		t.Error("Close did not cancel the handler's context")
	}
	if err := e.b.Publish(t.Context(), e.msg(ch, "k", e.id("1"))); !errors.Is(err, calf.ErrClosed) {
		t.Errorf("Publish after Close = %v, want calf.ErrClosed", err)
	}
	if sub, err := e.b.Subscribe(t.Context(), ch, func(context.Context, *calf.Message) error { return nil }, nil); err == nil {
		_ = sub.Close()
		t.Error("Subscribe after Close succeeded")
	}
	_ = e.b.Close() // a second Close must not panic
}

// testBackpressure checks that Publish blocks once a group holds its bound
// of unhandled messages, returns the context's error when the context ends
// first, and resumes once the handler makes room.
func testBackpressure(e *env) {
	t := e.t
	if e.f.Unbounded {
		t.Skip("Features.Unbounded: the broker cannot bound its queues, so Publish never blocks")
	}
	size := e.f.QueueSize
	if size <= 0 {
		t.Fatal("Features.QueueSize must be set, or Features.Unbounded declared")
	}
	ch := e.channel("full")
	started, releaseCh := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseCh) })
	var first atomic.Bool
	got := newCollector()
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		if !first.Swap(true) {
			close(started)
			select {
			case <-releaseCh:
			case <-ctx.Done():
			}
		}
		return got.handle(ctx, m)
	}, &calf.SubscribeOptions{Group: e.group("full")})
	t.Cleanup(release) // before the subscription closes

	var accepted, refused []string
	m := e.msg(ch, "k", e.id("0"))
	e.publish(m)
	accepted = append(accepted, m.ID)
	wait(t, "handler start", started)
	for i := 1; i < size; i++ {
		m := e.msg(ch, "k", e.id(strconv.Itoa(i)))
		e.publish(m)
		accepted = append(accepted, m.ID)
	}
	// The group now holds size messages, or size-1 if the one being handled
	// does not count: one of the next publishes must block.
	for i := 0; i < 3 && len(refused) == 0; i++ {
		m := e.msg(ch, "k", e.id("extra"+strconv.Itoa(i)))
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err := e.b.Publish(ctx, m)
		cancel()
		switch {
		case err == nil:
			accepted = append(accepted, m.ID)
		case errors.Is(err, context.DeadlineExceeded):
			refused = append(refused, m.ID)
		default:
			t.Fatalf("Publish to a full group = %v, want an error matching context.DeadlineExceeded", err)
		}
	}
	if len(refused) == 0 {
		t.Fatalf("Publish did not block with %d messages held by a group bounded to %d", len(accepted), size)
	}

	last := e.msg(ch, "k", e.id("last"))
	published := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		published <- e.b.Publish(ctx, last)
	}()
	release()
	if err := wait(t, "Publish once the handler made room", published); err != nil {
		t.Fatalf("Publish once the handler made room: %v", err)
	}
	accepted = append(accepted, last.ID)
	msgs := got.waitID(t, "last message", last.ID)
	// A refused publish may still have reached a networked broker; only
	// the order of the accepted messages is checked.
	handled := slices.DeleteFunc(ids(msgs), func(id string) bool { return slices.Contains(refused, id) })
	if diff := cmp.Diff(accepted, handled); diff != "" {
		t.Errorf("handled (-accepted +handled):\n%s", diff)
	}
}
