package calf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
)

func newClient(t *testing.T, opts *calf.Options) *calf.Client {
	t.Helper()
	return newClientOn(t, memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }}), opts)
}

// newClientOn returns a client on b; both close when the test ends.
func newClientOn(t *testing.T, b *memory.Broker, opts *calf.Options) *calf.Client {
	t.Helper()
	t.Cleanup(func() { _ = b.Close() })
	c := calf.NewClient(b, opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEmitPropagatesMetadata(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, nil)
	got := make(chan *calf.Message, 1)
	if err := c.Handle(ctx, "a.first", func(ctx context.Context, m *calf.Message) error {
		_, err := c.Emit(ctx, "a.second", map[string]int{"n": 2})
		return err
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, "a.second", func(_ context.Context, m *calf.Message) error {
		got <- m
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	first, err := c.Emit(ctx, "a.first", "hi", calf.WithID("m1"),
		calf.WithMetadata(calf.Metadata{CorrelationID: "corr", RunID: "run", SessionID: "sess", Traceparent: "tp"}))
	if err != nil {
		t.Fatal(err)
	}
	if first.Key != "run" {
		t.Errorf("key = %q, want the run id", first.Key)
	}
	select {
	case m := <-got:
		md := m.Metadata
		if md.CorrelationID != "corr" || md.RunID != "run" || md.SessionID != "sess" || md.Traceparent != "tp" || md.CausationID != "m1" {
			t.Errorf("metadata not propagated: %+v", md)
		}
		if m.Key != "run" || md.Attempt != 1 || md.Time.IsZero() {
			t.Errorf("key %q attempt %d time %v", m.Key, md.Attempt, md.Time)
		}
		var d map[string]int
		if err := m.Decode(&d); err != nil || d["n"] != 2 {
			t.Errorf("data = %s (%v)", m.Data, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second message never arrived")
	}
}

// A message names the process that published it, not the one that
// published its cause.
func TestProducerNamesThePublisher(t *testing.T) {
	ctx := t.Context()
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	caller := calf.NewClient(b, &calf.Options{Name: "caller/1"})
	worker := calf.NewClient(b, &calf.Options{Name: "worker/2"})
	anonymous := calf.NewClient(b, nil)
	for _, c := range []*calf.Client{caller, worker, anonymous} {
		t.Cleanup(func() { _ = c.Close() })
	}
	got := make(chan *calf.Message, 2)
	if err := worker.Handle(ctx, "p.first", func(ctx context.Context, m *calf.Message) error {
		got <- m
		_, err := worker.Emit(ctx, "p.second", 2)
		return err
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := anonymous.Handle(ctx, "p.second", func(_ context.Context, m *calf.Message) error {
		got <- m
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Emit(ctx, "p.first", 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"caller/1", "worker/2"} {
		select {
		case m := <-got:
			if m.Metadata.Producer != want {
				t.Errorf("%s: producer %q, want %q", m.Channel, m.Metadata.Producer, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a message never arrived")
		}
	}
	if name := calf.ProcessName(); !strings.HasSuffix(name, "/"+strconv.Itoa(os.Getpid())) {
		t.Errorf("ProcessName() = %q", name)
	}
}

func TestPublishRejectsOversizeAndBadChannels(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, &calf.Options{MaxMessageSize: 64})
	_, err := c.Emit(ctx, "a.b", strings.Repeat("x", 100))
	var se *calf.SizeError
	if !errors.Is(err, calf.ErrMessageTooLarge) || !errors.As(err, &se) || se.Limit != 64 {
		t.Fatalf("oversize emit: %v", err)
	}
	if _, err := c.Emit(ctx, "a.*", 1); !errors.Is(err, calf.ErrInvalidChannel) {
		t.Fatalf("wildcard channel: %v", err)
	}
	if _, err := c.Emit(ctx, "a.b", func() {}); err == nil {
		t.Fatal("unencodable data accepted")
	}
	if _, err := c.Emit(ctx, "a.b", json.RawMessage(`{"a":`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("invalid raw JSON: %v", err)
	}
	// An option that replaces encoded data is checked like raw data.
	replace := func(m *calf.Message) { m.Data = json.RawMessage(`nope`) }
	if _, err := c.Emit(ctx, "a.b", 1, replace); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("data replaced by an option: %v", err)
	}
	if err := c.Handle(ctx, "a..b", func(context.Context, *calf.Message) error { return nil }, nil); !errors.Is(err, calf.ErrInvalidChannel) {
		t.Fatalf("bad pattern: %v", err)
	}
}

func TestRequestReplyNoCrossTalk(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, nil)
	if err := c.Handle(ctx, "svc.echo", func(ctx context.Context, m *calf.Message) error {
		var n int
		if err := m.Decode(&n); err != nil {
			return calf.Permanent(err)
		}
		_, err := c.Emit(ctx, "svc.reply", n*10)
		return err
	}, &calf.SubscribeOptions{Group: "echo"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			m, err := c.Request(ctx, "svc.echo", i, "svc.reply")
			if err != nil {
				errs <- err
				return
			}
			var got int
			if err := json.Unmarshal(m.Data, &got); err != nil || got != i*10 {
				errs <- fmt.Errorf("request %d got %s", i, m.Data)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The test runs in a bubble: the request's deadline passes without
// waiting for it, and synctest.Wait lets the late reply arrive.
func TestRequestTimesOutAndCountsLateReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, nil)
		release := make(chan struct{})
		if err := c.Handle(t.Context(), "svc.slow", func(ctx context.Context, m *calf.Message) error {
			<-release
			_, err := c.Emit(ctx, "svc.slowreply", "late")
			return err
		}, nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Request(ctx, "svc.slow", 1, "svc.slowreply")
		if !errors.Is(err, calf.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
		}
		close(release)
		synctest.Wait()
		if c.OrphanReplies() != 1 {
			t.Fatalf("orphan replies = %d, want 1", c.OrphanReplies())
		}
	})
}

func TestHandlerPanicIsRetriedNotFatal(t *testing.T) {
	c := newClient(t, nil)
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	if err := c.Handle(t.Context(), "p.x", func(context.Context, *calf.Message) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			panic("first delivery explodes")
		}
		close(done)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Emit(t.Context(), "p.x", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("panicking message was not redelivered")
	}
}

// A handler that always panics is recovered once, by the broker: each
// attempt fails, the message is parked after its last attempt, and its
// dead letter tells of one panic with one stack.
func TestHandlerPanicRecoveredOnceAndParked(t *testing.T) {
	b := memory.New(&memory.Options{MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Millisecond }})
	t.Cleanup(func() { _ = b.Close() })
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close() })
	dead := make(chan calf.DeadLetter, 1)
	if err := c.Handle(t.Context(), calf.DeadLetterChannel, func(_ context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			return err
		}
		dead <- dl
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []int
	if err := c.Handle(t.Context(), "p.y", func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		attempts = append(attempts, m.Metadata.Attempt)
		mu.Unlock()
		panic("always explodes")
	}, &calf.SubscribeOptions{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Emit(t.Context(), "p.y", 1); err != nil {
		t.Fatal(err)
	}
	var dl calf.DeadLetter
	select {
	case dl = <-dead:
	case <-time.After(10 * time.Second):
		t.Fatal("the panicking message was not parked")
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]int{1, 2}, attempts); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if dl.Attempts != 2 || dl.Group != "g" {
		t.Errorf("dead letter: %d attempts in group %q; want 2 in g", dl.Attempts, dl.Group)
	}
	if !strings.HasPrefix(dl.Error, "memory: handler panicked on p.y: always explodes\n") {
		t.Errorf("dead letter error %q; want the broker's recovery of the panic", dl.Error)
	}
	if n := strings.Count(dl.Error, "handler panicked"); n != 1 {
		t.Errorf("the panic was recovered %d times; want once:\n%s", n, dl.Error)
	}
	if n := strings.Count(dl.Error, "runtime/debug.Stack"); n != 1 {
		t.Errorf("dead letter error holds %d stacks; want 1:\n%s", n, dl.Error)
	}
}

func TestShutdownStopsDelivery(t *testing.T) {
	b := memory.New(nil)
	c := newClientOn(t, b, nil)
	got := make(chan struct{}, 10)
	if err := c.Handle(t.Context(), "s.x", func(context.Context, *calf.Message) error {
		got <- struct{}{}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(t.Context(), "s.y", func(context.Context, *calf.Message) error { return nil }, nil); !errors.Is(err, calf.ErrClosed) {
		t.Fatalf("Handle after Close: %v", err)
	}
	if _, err := c.Emit(t.Context(), "s.x", 1); err != nil {
		t.Fatal(err)
	}
	// Once the broker has handled every message, a delivery would have
	// come.
	if err := b.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("delivered after shutdown")
	default:
	}
}

func TestExponentialBackoff(t *testing.T) {
	backoff := calf.ExponentialBackoff(50*time.Millisecond, 5*time.Second)
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 25 * time.Millisecond, 50 * time.Millisecond},
		{2, 50 * time.Millisecond, 100 * time.Millisecond},
		{4, 200 * time.Millisecond, 400 * time.Millisecond},
		{8, 2500 * time.Millisecond, 5 * time.Second},
		{1000, 2500 * time.Millisecond, 5 * time.Second},
	}
	for _, tc := range tests {
		for range 50 {
			if d := backoff(tc.attempt); d < tc.min || d > tc.max {
				t.Errorf("backoff(%d) = %v, want within [%v, %v]", tc.attempt, d, tc.min, tc.max)
			}
		}
	}
}

func TestFollowerAdd(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, nil)
	f, err := c.Follow(ctx, "x.a", "corr")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add("y.>"); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("bad..pattern"); err == nil {
		t.Error("Add of an invalid pattern succeeded")
	}
	for _, ch := range []string{"x.a", "y.b.c", "z.a"} {
		for _, corr := range []string{"corr", "other"} {
			if _, err := c.Emit(ctx, ch, ch, calf.WithMetadata(calf.Metadata{CorrelationID: corr})); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := map[string]bool{}
	for range 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := f.Next(wctx)
		cancel()
		if err != nil {
			t.Fatalf("Next after %v: %v", got, err)
		}
		if m.Metadata.CorrelationID != "corr" {
			t.Errorf("message of correlation id %q", m.Metadata.CorrelationID)
		}
		got[m.Channel] = true
	}
	if !got["x.a"] || !got["y.b.c"] {
		t.Errorf("channels followed: %v, want x.a and y.b.c", got)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if m, err := f.Next(wctx); err == nil {
		t.Errorf("a third message, on %s", m.Channel)
	}
	f.Close()
	if err := f.Add("w.a"); !errors.Is(err, calf.ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
	}
}

func TestFollowerAddTree(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, nil)
	f, err := c.Follow(ctx, "x.a", "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.AddTree("dl.x"); err != nil {
		t.Fatal(err)
	}
	for _, corr := range []string{"r10", "r2.r1", "r1", "r1.2.writer", "r1/call_1", "r1.2.writer/call_7", "r"} {
		if _, err := c.Emit(ctx, "dl.x", corr, calf.WithMetadata(calf.Metadata{CorrelationID: corr})); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 4 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := f.Next(wctx)
		cancel()
		if err != nil {
			t.Fatalf("Next after %v: %v", got, err)
		}
		got = append(got, m.Metadata.CorrelationID)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if m, err := f.Next(wctx); err == nil {
		got = append(got, m.Metadata.CorrelationID)
	}
	want := []string{"r1", "r1.2.writer", "r1.2.writer/call_7", "r1/call_1"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("correlation ids followed: %v, want %v", got, want)
	}
	if n := c.OrphanReplies(); n != 3 {
		t.Errorf("orphan replies = %d, want the 3 unfollowed messages", n)
	}
}

// deletingBroker is a broker with per-channel resources: it records the
// channels it is asked to delete, and fails when err is set.
type deletingBroker struct {
	*memory.Broker
	mu      sync.Mutex
	deleted []string
	err     error
}

func (b *deletingBroker) DeleteChannels(_ context.Context, channels ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deleted = append(b.deleted, channels...)
	return b.err
}

func (b *deletingBroker) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deleted)
}

// TestShutdownDeletesTheInbox: a client that handed out its inbox deletes
// it when it shuts down, once; a client that did not leaves the broker
// alone; a failed deletion is logged, not returned.
func TestShutdownDeletesTheInbox(t *testing.T) {
	newBroker := func(err error) *deletingBroker {
		b := &deletingBroker{Broker: memory.New(nil), err: err}
		t.Cleanup(func() { _ = b.Broker.Close() })
		return b
	}

	b := newBroker(nil)
	c := calf.NewClient(b, nil)
	f, err := c.Follow(t.Context(), c.Inbox(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.got(), []string{c.Inbox()}; !slices.Equal(got, want) {
		t.Errorf("deleted %q, want %q", got, want)
	}

	b = newBroker(nil)
	worker := calf.NewClient(b, nil)
	if err := worker.Handle(t.Context(), "w.x", func(context.Context, *calf.Message) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if err := worker.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.got(); len(got) != 0 {
		t.Errorf("a client that never used its inbox deleted %q", got)
	}

	b = newBroker(errors.New("cluster unreachable"))
	var logs strings.Builder
	c = calf.NewClient(b, &calf.Options{Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})
	_ = c.Inbox()
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v, want nil: a failed deletion only leaves the inbox behind", err)
	}
	if !strings.Contains(logs.String(), "cluster unreachable") {
		t.Errorf("the failed deletion was not logged: %q", logs.String())
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestFollowerBufferOverflow checks that a follower whose reader fell
// behind by more than its buffer is told so, after the messages it holds,
// and never reads past a hole.
func TestFollowerBufferOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		c := newClient(t, &calf.Options{FollowBuffer: 3})
		f, err := c.Follow(ctx, "x.a", "corr")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		emit := func(n int) {
			t.Helper()
			if _, err := c.Emit(ctx, "x.a", n, calf.WithKey("k"), calf.WithMetadata(calf.Metadata{CorrelationID: "corr"})); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 5 {
			emit(i)
		}
		synctest.Wait() // every message delivered
		for want := range 3 {
			m, err := f.Next(ctx)
			if err != nil {
				t.Fatalf("message %d: %v", want, err)
			}
			var got int
			if err := m.Decode(&got); err != nil || got != want {
				t.Fatalf("message %d is %d (%v)", want, got, err)
			}
		}
		// The buffer has room again, but a message now would follow a
		// hole: it is dropped too.
		emit(5)
		synctest.Wait()
		for range 2 {
			_, err = f.Next(ctx)
			if !errors.Is(err, calf.ErrFollowerBehind) {
				t.Fatalf("Next after the overflow = %v, want ErrFollowerBehind", err)
			}
		}
		if !strings.Contains(err.Error(), "3 messages") {
			t.Errorf("the error does not count the 3 messages dropped: %v", err)
		}
	})
}

// A follower collects a message delivered again (same channel and id) once,
// whether the redelivery comes at once or after many other messages, and a
// message of the same id on another channel is another message.
func TestFollowerDropsRedeliveries(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	c := calf.NewClient(b, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f, err := c.Follow(ctx, "dup.>", "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	send := func(channel, id string) {
		t.Helper()
		if _, err := c.Emit(ctx, channel, id, calf.WithID(id), calf.WithKey("r1"), calf.WithMetadata(calf.Metadata{CorrelationID: "r1"})); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 100 {
		id := fmt.Sprintf("m%d", i)
		send("dup.a", id)
		want = append(want, "dup.a/"+id)
		send("dup.a", id) // at once
		if i >= 20 {
			send("dup.a", fmt.Sprintf("m%d", i-20)) // later, past the scanned first ones
		}
	}
	send("dup.b", "m0") // the same id on another channel
	want = append(want, "dup.b/m0")
	send("dup.end", "end")
	want = append(want, "dup.end/end")
	var got []string
	for len(got) < len(want) {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		got = append(got, m.Channel+"/"+m.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
}
