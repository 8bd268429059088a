package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

// keyLedger records the effects of handlers per key: the message numbers
// handled with success, in the order they were, and whether two handlers
// of one key ever ran at once.
type keyLedger struct {
	mu      sync.Mutex
	running map[string]bool
	effects map[string][]int
	total   int
	overlap []string
	notify  chan struct{}
}

func newKeyLedger() *keyLedger {
	return &keyLedger{running: map[string]bool{}, effects: map[string][]int{}, notify: make(chan struct{}, 1)}
}

// enter marks m's key busy, noting an overlap, and returns its number.
func (l *keyLedger) enter(m *calf.Message) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[m.Key] {
		l.overlap = append(l.overlap, m.ID)
	}
	l.running[m.Key] = true
	n, _ := strconv.Atoi(string(m.Data))
	return n
}

// leave marks m's key idle, recording its effect when ok.
func (l *keyLedger) leave(m *calf.Message, n int, ok bool) {
	l.mu.Lock()
	l.running[m.Key] = false
	if ok {
		l.effects[m.Key] = append(l.effects[m.Key], n)
		l.total++
	}
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// waitDistinct waits until every key has had the effect of its perKey
// messages.
func (l *keyLedger) waitDistinct(t *testing.T, keys, perKey int) {
	t.Helper()
	deadline := time.NewTimer(2 * timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		done := 0
		for _, e := range l.effects {
			seen := map[int]bool{}
			for _, n := range e {
				seen[n] = true
			}
			if len(seen) == perKey {
				done++
			}
		}
		l.mu.Unlock()
		if done == keys {
			return
		}
		select {
		case <-l.notify:
		case <-deadline.C:
			t.Fatalf("%d of %d keys complete after %v", done, keys, 2*timeout)
		}
	}
}

// check fails t unless each key's messages had their effects in order:
// when message n has its first effect, every message before it has had
// one. With exact set, each message has exactly one effect.
func (l *keyLedger) check(t *testing.T, keys, perKey int, exact bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.overlap) > 0 {
		t.Errorf("handlers of one key ran at once for %d messages, first %s", len(l.overlap), l.overlap[0])
	}
	if len(l.effects) != keys {
		t.Errorf("%d keys handled, want %d", len(l.effects), keys)
	}
	for k, e := range l.effects {
		next := 0
		for _, n := range e {
			if n > next {
				t.Errorf("key %s: message %d handled before %d: %v", k, n, next, e)
				break
			}
			if n == next {
				next++
			}
		}
		if next != perKey {
			t.Errorf("key %s: %d of %d messages handled: %v", k, next, perKey, e)
		}
		if exact && len(e) != perKey {
			t.Errorf("key %s: %d effects, want %d: %v", k, len(e), perKey, e)
		}
	}
}

// publishKeys publishes perKey messages for each of keys keys, the
// message number as the data, interleaving the keys.
func publishKeys(t *testing.T, b *Broker, ch string, keys, perKey int) {
	t.Helper()
	for i := range perKey {
		for k := range keys {
			m := msg(ch, "k"+strconv.Itoa(k), fmt.Sprintf("k%d-%d", k, i))
			m.Data = []byte(strconv.Itoa(i))
			publish(t, b, m)
		}
	}
}

// subOf returns the subscription behind sub.
func subOf(sub calf.Subscription) *subscription { return sub.(*subscription) }

// TestSlowKeyHoldsNoOtherOfItsPartition checks, with a single partition,
// that a handler that takes long for one key holds up no other key.
func TestSlowKeyHoldsNoOtherOfItsPartition(t *testing.T) {
	backendsWith(t, func(o *Options) { o.Partitions = 1 }, func(t *testing.T, open func() *Broker) {
		b := open()
		const others = 50
		var handled atomic.Int32
		allDone := make(chan struct{})
		slow := make(chan error, 1)
		subscribe(t, b, "slow.x", func(ctx context.Context, m *calf.Message) error {
			if m.Key != "slow" {
				if handled.Add(1) == others {
					close(allDone)
				}
				return nil
			}
			select {
			case <-allDone:
				slow <- nil
			case <-time.After(timeout):
				slow <- fmt.Errorf("%d of %d other keys handled while the slow key's handler ran", handled.Load(), others)
			case <-ctx.Done():
			}
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("slow.x", "slow", "slow"))
		for i := range others {
			publish(t, b, msg("slow.x", "k"+strconv.Itoa(i), "m"+strconv.Itoa(i)))
		}
		select {
		case err := <-slow:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * timeout):
			t.Fatal("the slow key's handler did not end")
		}
	})
}

// TestKeyOrderWithRandomDelaysAndFailures checks per-key order and
// completeness over 200 keys × 50 messages on 4 partitions, in a group of
// two members whose handlers take 0–2 ms and fail about once in 20.
func TestKeyOrderWithRandomDelaysAndFailures(t *testing.T) {
	backendsWith(t, func(o *Options) { o.Partitions = 4 }, func(t *testing.T, open func() *Broker) {
		b := open()
		const keys, perKey = 200, 50
		l := newKeyLedger()
		var failures atomic.Int32
		h := func(ctx context.Context, m *calf.Message) error {
			n := l.enter(m)
			time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Millisecond))))
			if rand.IntN(20) == 0 {
				failures.Add(1)
				l.leave(m, n, false)
				return errors.New("a random failure")
			}
			l.leave(m, n, true)
			return nil
		}
		opts := &calf.SubscribeOptions{Group: "g", MaxAttempts: 30}
		subscribe(t, b, "ord.x", h, opts)
		subscribe(t, b, "ord.x", h, opts)
		publishKeys(t, b, "ord.x", keys, perKey)
		l.waitDistinct(t, keys, perKey)
		l.check(t, keys, perKey, true)
		if failures.Load() == 0 {
			t.Error("no handler failed: the test did not exercise retries")
		}
	})
}

// TestCloseWithKeysInFlight checks that a member closed while it holds
// many keys in flight, some of its partitions being handed over to a
// second member that joined meanwhile, loses nothing: the second member
// handles every message of every key, in order per key.
func TestCloseWithKeysInFlight(t *testing.T) {
	backendsWith(t, func(o *Options) { o.Partitions = 4 }, func(t *testing.T, open func() *Broker) {
		b := open()
		const keys, perKey, stuckAt = 64, 10, 3
		l := newKeyLedger()
		var stuck atomic.Int32
		allStuck := make(chan struct{})
		opts := &calf.SubscribeOptions{Group: "g"}
		a := subscribe(t, b, "fly.x", func(ctx context.Context, m *calf.Message) error {
			n := l.enter(m)
			if n == stuckAt {
				if stuck.Add(1) == keys {
					close(allStuck)
				}
				<-ctx.Done()
				l.leave(m, n, false)
				return ctx.Err()
			}
			l.leave(m, n, true)
			return nil
		}, opts)
		publishKeys(t, b, "fly.x", keys, perKey)
		select {
		case <-allStuck:
		case <-time.After(timeout):
			t.Fatalf("%d of %d keys in flight at once", stuck.Load(), keys)
		}
		subscribe(t, b, "fly.x", func(ctx context.Context, m *calf.Message) error {
			n := l.enter(m)
			l.leave(m, n, true)
			return nil
		}, opts)
		// The first member, which holds every partition, starts giving
		// up the second member's share (its handlers still run).
		la := subOf(a).lease
		testwait.For(t, timeout, "the first member to give partitions up", func() bool {
			la.mu.Lock()
			defer la.mu.Unlock()
			giving := 0
			for _, h := range la.owned {
				if h.drained != nil {
					giving++
				}
			}
			return giving == b.opts.Partitions/2
		})
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		l.waitDistinct(t, keys, perKey)
		l.check(t, keys, perKey, false)
	})
}

// TestBoundedInFlight checks that a subscription handles at most
// Concurrency messages at once and holds at most Window messages of each
// partition, however many are published.
func TestBoundedInFlight(t *testing.T) {
	backendsWith(t, func(o *Options) { o.Partitions, o.Window = 2, 5 }, func(t *testing.T, open func() *Broker) {
		b := open()
		const concurrency, n = 3, 60
		var (
			running, most atomic.Int32
			handled       atomic.Int32
		)
		release := make(chan struct{})
		sub := subscribe(t, b, "mem.x", func(ctx context.Context, m *calf.Message) error {
			r := running.Add(1)
			for {
				old := most.Load()
				if r <= old || most.CompareAndSwap(old, r) {
					break
				}
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			running.Add(-1)
			handled.Add(1)
			return nil
		}, &calf.SubscribeOptions{Group: "g", Concurrency: concurrency})
		s := subOf(sub)
		// Half the messages on one key, half on keys of their own.
		for i := range n {
			key := "same"
			if i%2 == 1 {
				key = "k" + strconv.Itoa(i)
			}
			publish(t, b, msg("mem.x", key, "m"+strconv.Itoa(i)))
		}
		heldNow := func() (total, perPart int) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, pt := range s.parts {
				pt.mu.Lock()
				total += len(pt.held)
				perPart = max(perPart, len(pt.held))
				pt.mu.Unlock()
			}
			return total, perPart
		}
		// Let the member fill its windows: the server counts a window of
		// each partition's messages delivered and not acknowledged, and
		// more would show there once fetched.
		for p := range b.opts.Partitions {
			waitAckPending(t, b, ConsumerName("g", p), b.opts.Window)
		}
		testwait.For(t, timeout, "the windows held", func() bool {
			total, _ := heldNow()
			return total >= 2*b.opts.Window
		})
		total, perPart := heldNow()
		if perPart > b.opts.Window {
			t.Errorf("%d messages held of one partition, over the window of %d", perPart, b.opts.Window)
		}
		if total != 2*b.opts.Window {
			t.Errorf("%d messages held, want %d (2 partitions × window %d)", total, 2*b.opts.Window, b.opts.Window)
		}
		if got := most.Load(); got != concurrency {
			t.Errorf("%d handlers at once, want %d", got, concurrency)
		}
		close(release)
		testwait.ForErr(t, timeout, "every message handled", func() error {
			if h := handled.Load(); h < n {
				return fmt.Errorf("%d of %d", h, n)
			}
			return nil
		})
		if got := most.Load(); got > concurrency {
			t.Errorf("%d handlers at once, over the concurrency of %d", got, concurrency)
		}
	})
}
