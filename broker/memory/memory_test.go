package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
)

const timeout = brokertest.Timeout

func fastBackoff(int) time.Duration { return time.Millisecond }

// newBroker returns a broker with a short backoff, closed at the end of
// the test.
func newBroker(t testing.TB, opts *memory.Options) *memory.Broker {
	t.Helper()
	var o memory.Options
	if opts != nil {
		o = *opts
	}
	if o.Backoff == nil {
		o.Backoff = fastBackoff
	}
	b := memory.New(&o)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	const queueSize = 16
	brokertest.Run(t, func(t *testing.T) calf.Broker {
		return newBroker(t, &memory.Options{QueueSize: queueSize})
	}, brokertest.Features{QueueSize: queueSize})
}

func subscribe(t *testing.T, b calf.Broker, pattern string, h calf.Handler, opts *calf.SubscribeOptions) calf.Subscription {
	t.Helper()
	sub, err := b.Subscribe(t.Context(), pattern, h, opts)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", pattern, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func msg(channel, key, id string) *calf.Message {
	return &calf.Message{ID: id, Channel: channel, Key: key, Data: json.RawMessage(`{}`), Metadata: calf.Metadata{Time: time.Now()}}
}

func publish(t *testing.T, b calf.Broker, msgs ...*calf.Message) {
	t.Helper()
	for _, m := range msgs {
		if err := b.Publish(t.Context(), m); err != nil {
			t.Fatalf("Publish(%s): %v", m.ID, err)
		}
	}
}

func drain(t *testing.T, b *memory.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

func wait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("%s: not done after %v", what, timeout)
		panic("unreachable")
	}
}

// recorder records the ids a handler receives.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) handle(_ context.Context, m *calf.Message) error {
	r.mu.Lock()
	r.ids = append(r.ids, m.ID)
	r.mu.Unlock()
	return nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func TestGroupPatternMismatch(t *testing.T) {
	b := newBroker(t, nil)
	nop := func(context.Context, *calf.Message) error { return nil }
	subscribe(t, b, "a.b", nop, &calf.SubscribeOptions{Group: "g"})
	if _, err := b.Subscribe(t.Context(), "a.c", nop, &calf.SubscribeOptions{Group: "g"}); !errors.Is(err, memory.ErrGroupPattern) {
		t.Fatalf("Subscribe with another pattern = %v, want ErrGroupPattern", err)
	}
	subscribe(t, b, "a.b", nop, &calf.SubscribeOptions{Group: "g"})
	// Private groups never conflict.
	subscribe(t, b, "a.c", nop, nil)
	subscribe(t, b, "a.d", nop, nil)
}

// The test runs in a synctest bubble, so that it can wait until a
// blocked Publish has had every chance to return.
func TestBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &memory.Options{QueueSize: 2})
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		var rec recorder
		subscribe(t, b, "bp.x", func(ctx context.Context, m *calf.Message) error {
			once.Do(func() {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
			return rec.handle(ctx, m)
		}, nil)
		publish(t, b, msg("bp.x", "k", "m0"))
		wait(t, "handler start", started)
		publish(t, b, msg("bp.x", "k", "m1")) // the group now holds m0 and m1

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := b.Publish(ctx, msg("bp.x", "k", "refused"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish to a full group with a cancelled context = %v, want context.Canceled", err)
		}

		published := make(chan error, 1)
		go func() { published <- b.Publish(context.Background(), msg("bp.x", "k", "m2")) }()
		// Once every goroutine of the bubble is blocked, Publish has had its
		// chance to return.
		synctest.Wait()
		select {
		case err := <-published:
			t.Fatalf("Publish to a full group returned %v before the handler made room", err)
		default:
		}
		close(release)
		if err := wait(t, "blocked Publish", published); err != nil {
			t.Fatal(err)
		}
		drain(t, b)
		if diff := cmp.Diff([]string{"m0", "m1", "m2"}, rec.got()); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
	})
}

func TestBackpressureAcrossGroups(t *testing.T) {
	b := newBroker(t, &memory.Options{QueueSize: 1})
	release := make(chan struct{})
	var fast, slow recorder
	subscribe(t, b, "bp.>", fast.handle, nil)
	subscribe(t, b, "bp.>", func(ctx context.Context, m *calf.Message) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return slow.handle(ctx, m)
	}, nil)
	publish(t, b, msg("bp.x", "k", "m0"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Publish(ctx, msg("bp.x", "k", "refused")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with one full group = %v, want context.Canceled", err)
	}
	close(release)
	publish(t, b, msg("bp.x", "k", "m1"))
	drain(t, b)
	// A refused message reaches no group, not even the one with room.
	for name, r := range map[string]*recorder{"fast": &fast, "slow": &slow} {
		if diff := cmp.Diff([]string{"m0", "m1"}, r.got()); diff != "" {
			t.Errorf("%s group handled (-want +got):\n%s", name, diff)
		}
	}
}

// A chain of handlers, each publishing to the next group, holds at most
// HeldSize messages in all: a publish from outside waits, though each group
// has room.
func TestBackpressureOfAChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &memory.Options{QueueSize: 100, HeldSize: 2})
		release := make(chan struct{})
		var out recorder
		subscribe(t, b, "held.out", func(ctx context.Context, m *calf.Message) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return out.handle(ctx, m)
		}, nil)
		subscribe(t, b, "held.in", func(ctx context.Context, m *calf.Message) error {
			return b.Publish(ctx, msg("held.out", m.Key, "out-"+m.ID))
		}, nil)
		publish(t, b, msg("held.in", "a", "1"))
		publish(t, b, msg("held.in", "b", "2"))
		synctest.Wait() // held.out holds out-1 and out-2

		published := make(chan error, 1)
		go func() { published <- b.Publish(context.Background(), msg("held.in", "c", "3")) }()
		synctest.Wait()
		select {
		case err := <-published:
			t.Fatalf("Publish while the broker holds HeldSize messages returned %v", err)
		default:
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Publish(ctx, msg("held.in", "d", "refused")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish with a cancelled context = %v, want context.Canceled", err)
		}
		close(release)
		if err := wait(t, "blocked Publish", published); err != nil {
			t.Fatal(err)
		}
		drain(t, b)
		got := out.got()
		slices.Sort(got)
		if diff := cmp.Diff([]string{"out-1", "out-2", "out-3"}, got); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
	})
}

func TestPublishFromHandlerNeverBlocks(t *testing.T) {
	b := newBroker(t, &memory.Options{QueueSize: 1})
	release := make(chan struct{})
	var out recorder
	subscribe(t, b, "chain.out", func(ctx context.Context, m *calf.Message) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return out.handle(ctx, m)
	}, nil)
	done := make(chan error, 1)
	subscribe(t, b, "chain.in", func(ctx context.Context, m *calf.Message) error {
		// A context derived from the handler's counts as the handler's.
		ctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		for i := range 20 {
			if err := b.Publish(ctx, msg("chain.out", "k", "out"+strconv.Itoa(i))); err != nil {
				done <- err
				return err
			}
		}
		done <- nil
		return nil
	}, nil)
	publish(t, b, msg("chain.in", "k", "in"))
	if err := wait(t, "handler publishing to a full group", done); err != nil {
		t.Fatal(err)
	}
	close(release)
	drain(t, b)
	if n := len(out.got()); n != 20 {
		t.Errorf("handled %d messages, want 20", n)
	}
}

func TestDrain(t *testing.T) {
	b := newBroker(t, nil)
	var handled atomic.Int32
	var failed atomic.Bool
	subscribe(t, b, "d.a", func(ctx context.Context, m *calf.Message) error {
		for i := range 3 {
			if err := b.Publish(ctx, msg("d.b", m.Key, m.ID+"-"+strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	subscribe(t, b, "d.b", func(ctx context.Context, m *calf.Message) error {
		if !failed.Swap(true) {
			return errors.New("fail once")
		}
		handled.Add(1)
		return nil
	}, &calf.SubscribeOptions{Group: "b"})
	for i := range 10 {
		publish(t, b, msg("d.a", "k"+strconv.Itoa(i%3), "m"+strconv.Itoa(i)))
	}
	drain(t, b)
	if n := handled.Load(); n != 30 {
		t.Errorf("after Drain, %d messages handled, want 30", n)
	}

	block := make(chan struct{})
	defer close(block)
	subscribe(t, b, "d.c", func(ctx context.Context, m *calf.Message) error {
		<-block
		return nil
	}, nil)
	publish(t, b, msg("d.c", "", "blocked"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Drain(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Drain with a busy handler and a cancelled context = %v, want context.Canceled", err)
	}
}

func TestIdleKeysHoldNoGoroutine(t *testing.T) {
	const concurrency = 8
	b := newBroker(t, &memory.Options{Concurrency: concurrency})
	release := make(chan struct{})
	started := make(chan struct{}, 1000)
	subscribe(t, b, "idle.x", func(ctx context.Context, m *calf.Message) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, nil)
	baseline := runtime.NumGoroutine()
	for i := range 500 {
		publish(t, b, msg("idle.x", "k"+strconv.Itoa(i), "m"+strconv.Itoa(i)))
	}
	for range concurrency {
		wait(t, "handler start", started)
	}
	// The 492 keys without a slot wait without a goroutine.
	if n := runtime.NumGoroutine() - baseline; n > concurrency+2 {
		t.Errorf("%d goroutines for %d busy keys and 492 waiting ones", n, concurrency)
	}
	close(release)
	drain(t, b)
	testwait.ForErr(t, timeout, fmt.Sprintf("at most %d goroutines after Drain", baseline), func() error {
		if n := runtime.NumGoroutine(); n > baseline {
			return fmt.Errorf("%d goroutines", n)
		}
		return nil
	})
}

func TestRetryFreesTheWorkerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, &memory.Options{Concurrency: 1, Backoff: func(int) time.Duration { return time.Hour }})
		var rec recorder
		sub := subscribe(t, b, "r.x", func(ctx context.Context, m *calf.Message) error {
			if m.Key == "a" {
				return errors.New("retry in an hour")
			}
			return rec.handle(ctx, m)
		}, nil)
		publish(t, b, msg("r.x", "a", "a1"), msg("r.x", "a", "a2"), msg("r.x", "b", "b1"))
		// Every goroutine of the bubble blocked: key a waits for its retry an
		// hour away on the bubble's clock, which has not moved.
		synctest.Wait()
		if len(rec.got()) == 0 {
			t.Fatal("key b was not handled while key a waited for its redelivery")
		}
		closed := make(chan error, 1)
		go func() { closed <- sub.Close() }()
		if err := wait(t, "Close during a backoff", closed); err != nil {
			t.Fatal(err)
		}
		drain(t, b)
		if got := b.Stats(); got.Discarded != 2 {
			t.Errorf("discarded %d messages, want 2 (a1 waiting and a2 behind it)", got.Discarded)
		}
	})
}

func TestMemberCloseMovesKeys(t *testing.T) {
	b := newBroker(t, nil)
	type call struct {
		member int
		id     string
	}
	var mu sync.Mutex
	var calls []call
	started := make(chan int, 1)
	var first atomic.Bool
	subs := make([]calf.Subscription, 2)
	for i := range subs {
		subs[i] = subscribe(t, b, "mv.x", func(ctx context.Context, m *calf.Message) error {
			mu.Lock()
			calls = append(calls, call{i, m.ID})
			mu.Unlock()
			if !first.Swap(true) {
				started <- i
				<-ctx.Done() // interrupted by Close
				return ctx.Err()
			}
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
	}
	publish(t, b, msg("mv.x", "k", "m0"))
	holder := wait(t, "first delivery", started)
	publish(t, b, msg("mv.x", "k", "m1"), msg("mv.x", "k", "m2"))
	if err := subs[holder].Close(); err != nil {
		t.Fatal(err)
	}
	drain(t, b)
	other := 1 - holder
	want := []call{{holder, "m0"}, {other, "m0"}, {other, "m1"}, {other, "m2"}}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestLastMemberLeavingDiscards(t *testing.T) {
	b := newBroker(t, nil)
	started := make(chan struct{})
	sub := subscribe(t, b, "ls.x", func(ctx context.Context, m *calf.Message) error {
		if m.ID == "m0" {
			close(started)
		}
		<-ctx.Done()
		return ctx.Err()
	}, &calf.SubscribeOptions{Group: "g"})
	publish(t, b, msg("ls.x", "k", "m0"))
	wait(t, "handler start", started)
	publish(t, b, msg("ls.x", "k", "m1"), msg("ls.x", "", "m2"), msg("ls.x", "j", "m3"))
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	drain(t, b)
	if got := b.Stats().Discarded; got != 4 {
		t.Errorf("discarded %d messages, want 4", got)
	}
	var rec recorder
	subscribe(t, b, "ls.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
	publish(t, b, msg("ls.x", "k", "m4"))
	drain(t, b)
	if diff := cmp.Diff([]string{"m4"}, rec.got()); diff != "" {
		t.Errorf("new member of the group handled (-want +got):\n%s", diff)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStatsAndLogs(t *testing.T) {
	var logs syncBuffer
	b := newBroker(t, &memory.Options{
		MaxAttempts: 2,
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
		Now:         func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	var dead recorder
	subscribe(t, b, calf.DeadLetterChannel, dead.handle, nil)
	var failedOnce atomic.Bool
	subscribe(t, b, "st.x", func(ctx context.Context, m *calf.Message) error {
		switch m.ID {
		case "flaky":
			if !failedOnce.Swap(true) {
				return errors.New("flaky")
			}
		case "poison":
			return errors.New("poison")
		case "panics":
			panic("boom")
		}
		return nil
	}, &calf.SubscribeOptions{Group: "g"})
	publish(t, b, msg("st.x", "k", "ok"), msg("st.x", "k", "flaky"), msg("st.x", "j", "poison"), msg("st.x", "", "panics"))
	drain(t, b)
	// Deliveries: ok 1, flaky 2, poison 2 (the broker's MaxAttempts),
	// panics 2; the two dead letters once each.
	want := memory.Stats{Published: 6, Delivered: 9, Redelivered: 3, DeadLettered: 2}
	if diff := cmp.Diff(want, b.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	got := dead.got()
	if diff := cmp.Diff([]string{"deadletter.g.panics", "deadletter.g.poison"}, sorted(got)); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", "id=poison", "group=g", "attempts=2", "error=poison", "handler panicked"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestFailingDeadLetterIsRetriedUntilHandled(t *testing.T) {
	var logs syncBuffer
	b := newBroker(t, &memory.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var letters atomic.Int32
	subscribe(t, b, ">", func(_ context.Context, m *calf.Message) error {
		if m.Channel == calf.DeadLetterChannel && letters.Add(1) > 3 {
			return nil // the recorder's store is back
		}
		return calf.Permanent(errors.New("rejects everything"))
	}, &calf.SubscribeOptions{MaxAttempts: 2})
	publish(t, b, msg("fd.x", "k", "m"))
	drain(t, b)
	if got := b.Stats().DeadLettered; got != 1 {
		t.Errorf("dead-lettered %d messages, want 1 (a dead letter is never parked in turn)", got)
	}
	if got := letters.Load(); got != 4 {
		t.Errorf("the dead letter was delivered %d times, want 4 (three failures, then handled)", got)
	}
	if out := logs.String(); !strings.Contains(out, "id=deadletter..m") {
		t.Errorf("the failing dead letter was not logged:\n%s", out)
	}
}

func TestEachGroupGetsItsOwnCopy(t *testing.T) {
	b := newBroker(t, nil)
	got := make(chan *calf.Message, 2)
	h := func(_ context.Context, m *calf.Message) error {
		got <- m
		return nil
	}
	subscribe(t, b, "cp.x", h, nil)
	subscribe(t, b, "cp.x", h, &calf.SubscribeOptions{Group: "g"})
	m := msg("cp.x", "k", "m")
	publish(t, b, m)
	m1, m2 := wait(t, "first copy", got), wait(t, "second copy", got)
	if m1 == m2 || m1 == m || m2 == m {
		t.Error("a group's message is shared with another group or the publisher")
	}
	if m.Metadata.Attempt != 0 {
		t.Errorf("publisher's message changed: attempt %d", m.Metadata.Attempt)
	}
}

func TestSubscribeOptionsOverrideDefaults(t *testing.T) {
	b := newBroker(t, &memory.Options{MaxAttempts: 5})
	var attempts atomic.Int32
	subscribe(t, b, "ov.x", func(ctx context.Context, m *calf.Message) error {
		attempts.Add(1)
		return errors.New("fail")
	}, &calf.SubscribeOptions{MaxAttempts: 2})
	publish(t, b, msg("ov.x", "k", "m"))
	drain(t, b)
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestSubscribeErrors(t *testing.T) {
	b := newBroker(t, nil)
	if _, err := b.Subscribe(t.Context(), "a.b", nil, nil); err == nil {
		t.Error("Subscribe with a nil handler succeeded")
	}
	if err := b.Publish(t.Context(), nil); err == nil {
		t.Error("Publish(nil) succeeded")
	}
	_ = b.Close()
	if _, err := b.Subscribe(t.Context(), "a.b", func(context.Context, *calf.Message) error { return nil }, nil); !errors.Is(err, calf.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

func TestCloseReleasesBlockedPublisher(t *testing.T) {
	b := memory.New(&memory.Options{QueueSize: 1})
	sub, err := b.Subscribe(t.Context(), "cl.x", func(ctx context.Context, m *calf.Message) error {
		<-ctx.Done()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(t, b, msg("cl.x", "k", "m0"))
	published := make(chan error, 1)
	go func() { published <- b.Publish(context.Background(), msg("cl.x", "k", "m1")) }()
	go func() { _ = b.Close() }()
	if err := wait(t, "blocked Publish", published); err != nil && !errors.Is(err, calf.ErrClosed) {
		t.Errorf("blocked Publish during Close = %v, want nil or ErrClosed", err)
	}
}

func BenchmarkPublishHandle(b *testing.B) {
	for _, keys := range []int{1, 1024} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			br := memory.New(nil)
			defer br.Close()
			c := calf.NewClient(br, nil)
			defer c.Close()
			var handled atomic.Int64
			if err := c.Handle(b.Context(), "bench.x", func(context.Context, *calf.Message) error {
				handled.Add(1)
				return nil
			}, &calf.SubscribeOptions{Group: "bench"}); err != nil {
				b.Fatal(err)
			}
			names := make([]string, keys)
			for i := range names {
				names[i] = "run-" + strconv.Itoa(i)
			}
			data := json.RawMessage(`{"content":"hello"}`)
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := c.Emit(ctx, "bench.x", data, calf.WithKey(names[i%keys])); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if err := br.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			if handled.Load() != int64(i) {
				b.Fatalf("handled %d of %d", handled.Load(), i)
			}
		})
	}
}

// BenchmarkBrokerPublishHandle measures the broker alone, without the
// client's encoding and ids.
func BenchmarkBrokerPublishHandle(b *testing.B) {
	br := memory.New(nil)
	defer br.Close()
	var handled atomic.Int64
	sub, err := br.Subscribe(b.Context(), "bench.x", func(context.Context, *calf.Message) error {
		handled.Add(1)
		return nil
	}, &calf.SubscribeOptions{Group: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	m := msg("bench.x", "run-1", "m")
	ctx := b.Context()
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		if err := br.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := br.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	if handled.Load() != n {
		b.Fatalf("handled %d of %d", handled.Load(), n)
	}
}

func BenchmarkRequestReply(b *testing.B) {
	br := memory.New(nil)
	defer br.Close()
	c := calf.NewClient(br, nil)
	defer c.Close()
	if err := c.Handle(b.Context(), "bench.req", func(ctx context.Context, m *calf.Message) error {
		_, err := c.Emit(ctx, "bench.rep", m.Data)
		return err
	}, &calf.SubscribeOptions{Group: "svc"}); err != nil {
		b.Fatal(err)
	}
	data := json.RawMessage(`{"content":"ping"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Request(b.Context(), "bench.req", data, "bench.rep"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestGroupMembers(t *testing.T) {
	b := newBroker(t, nil)
	count := func() int {
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
	s1 := subscribe(t, b, "a.b", h, &calf.SubscribeOptions{Group: "g"})
	subscribe(t, b, "a.b", h, &calf.SubscribeOptions{Group: "g"})
	subscribe(t, b, "a.b", h, nil) // a private group is another group
	if n := count(); n != 2 {
		t.Errorf("members = %d, want 2", n)
	}
	_ = s1.Close()
	if n := count(); n != 1 {
		t.Errorf("members after one left = %d, want 1", n)
	}
}

func TestOutagesUseUpNoAttempt(t *testing.T) {
	b := newBroker(t, &memory.Options{MaxAttempts: 2})
	var calls atomic.Int32
	subscribe(t, b, "out.x", func(context.Context, *calf.Message) error {
		if calls.Add(1) <= 4 {
			return fmt.Errorf("agent: load run r: %w", calf.Unavailable(errors.New("store down")))
		}
		return nil
	}, nil)
	publish(t, b, msg("out.x", "k", "m"))
	drain(t, b)
	st := b.Stats()
	if calls.Load() != 5 || st.DeadLettered != 0 || st.OutageRetries != 4 {
		t.Errorf("%d calls, stats %+v; want 5 calls, the message handled after 4 outage retries and nothing parked", calls.Load(), st)
	}

	// Past its budget, an outage counts as attempts and parks.
	b2 := newBroker(t, &memory.Options{MaxAttempts: 2, OutageBudget: -1})
	subscribe(t, b2, "out.x", func(context.Context, *calf.Message) error {
		return calf.Unavailable(errors.New("store down"))
	}, nil)
	publish(t, b2, msg("out.x", "k", "m"))
	drain(t, b2)
	if st := b2.Stats(); st.DeadLettered != 1 || st.Delivered != 2 {
		t.Errorf("stats %+v with no outage budget; want the message parked after 2 deliveries", st)
	}
}

// A subscription made while messages of its channel are being published
// gets every message of a key published after it was made: a message
// that reached its new group before its member did must not leave the
// key without a worker.
func TestSubscribeWhilePublishing(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := b.Publish(ctx, &calf.Message{ID: "m", Channel: "c", Key: "k"}); err != nil {
					return // the test failed: a group is full
				}
			}
		}()
	}
	defer func() { cancel(); close(stop); wg.Wait() }()
	for i := range 1000 {
		marker := fmt.Sprintf("marker-%d", i)
		got := make(chan struct{})
		var once sync.Once
		sub, err := b.Subscribe(ctx, "c", func(_ context.Context, m *calf.Message) error {
			if m.ID == marker {
				once.Do(func() { close(got) })
			}
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Publish(ctx, &calf.Message{ID: marker, Channel: "c", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatalf("subscription %d: the message published after it was made never came", i)
		}
		_ = sub.Close()
	}
}
