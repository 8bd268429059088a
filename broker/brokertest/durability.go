package brokertest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

// ledger is what an idempotent handler keeps: the first delivery of a
// message id has its effect, recorded with the message's sequence number
// under its key; later deliveries of the id are recognised as duplicates
// and have none.
type ledger struct {
	t            *testing.T
	checkOverlap bool // report a key handled twice at once

	mu         sync.Mutex
	deliveries map[string]int   // per message id
	effects    map[string][]int // per key, sequence numbers in the order of their effects
	done       map[string]bool  // ids whose effect happened
	inFlight   map[string]int   // per key
	n          int              // effects
	calls      int              // deliveries
	notify     chan struct{}
}

func newLedger(t *testing.T) *ledger {
	return &ledger{
		t:          t,
		deliveries: map[string]int{},
		effects:    map[string][]int{},
		done:       map[string]bool{},
		inFlight:   map[string]int{},
		notify:     make(chan struct{}, 1),
	}
}

// handle is an idempotent handler: it has each message's effect once.
func (l *ledger) handle(_ context.Context, m *calf.Message) error {
	var i int
	if err := json.Unmarshal(m.Data, &i); err != nil {
		l.t.Errorf("message %s: %v", m.ID, err)
	}
	l.mu.Lock()
	l.calls++
	l.deliveries[m.ID]++
	l.inFlight[m.Key]++
	if n := l.inFlight[m.Key]; n > 1 && l.checkOverlap {
		l.t.Errorf("key %s: %d messages handled at once", m.Key, n)
	}
	l.mu.Unlock()
	if i%7 == 0 {
		runtime.Gosched()
	}
	l.mu.Lock()
	l.inFlight[m.Key]--
	if !l.done[m.ID] {
		l.done[m.ID] = true
		l.effects[m.Key] = append(l.effects[m.Key], i)
		l.n++
	}
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return nil
}

// effected returns the number of effects.
func (l *ledger) effected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// handled returns the ids whose effect happened.
func (l *ledger) handled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id := range l.done {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// deliveriesOf returns the deliveries of id so far.
func (l *ledger) deliveriesOf(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deliveries[id]
}

// resetDeliveries forgets the deliveries counted so far.
func (l *ledger) resetDeliveries() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries = map[string]int{}
}

// waitFor waits until done holds. It fails once Timeout passes without a
// delivery, so that a long test that progresses is not cut short.
func (l *ledger) waitFor(what string, done func() bool) {
	l.t.Helper()
	last := -1
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	for {
		if done() {
			return
		}
		l.mu.Lock()
		calls, n := l.calls, l.n
		l.mu.Unlock()
		if calls != last {
			last = calls
			deadline.Reset(Timeout)
		}
		select {
		case <-l.notify:
		case <-deadline.C:
			l.mu.Lock()
			effects := fmt.Sprint(l.effects)
			l.mu.Unlock()
			l.t.Fatalf("%s: no delivery for %v; %d effects: %s", what, Timeout, n, effects)
		}
	}
}

// waitEffects waits for n effects.
func (l *ledger) waitEffects(what string, n int) {
	l.t.Helper()
	l.waitFor(what, func() bool { return l.effected() >= n })
}

// check reports the keys k0, k1… whose effects are not the sequence
// 0…perKey-1 in order: a gap, a loss or a key out of order.
func (l *ledger) check(keys, perKey int) {
	l.t.Helper()
	want := make([]int, perKey)
	for i := range want {
		want[i] = i
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		if diff := cmp.Diff(want, l.effects[key]); diff != "" {
			l.t.Errorf("key %s: effects out of order, missing or repeated (-want +got):\n%s", key, diff)
		}
	}
}

// seqMsg returns message i of key k on ch, its data the number i.
func (e *env) seqMsg(ch string, k, i int) *calf.Message {
	m := e.msg(ch, fmt.Sprintf("k%d", k), e.id(fmt.Sprintf("k%d-%d", k, i)))
	m.Data = json.RawMessage(fmt.Sprint(i))
	return m
}

// publishSeq publishes messages from..to-1 of each of keys keys on b,
// interleaving the keys. It may run on a goroutine of its own.
func (e *env) publishSeq(b calf.Broker, ch string, keys, from, to int) error {
	for i := from; i < to; i++ {
		for k := range keys {
			ctx, cancel := context.WithTimeout(e.t.Context(), Timeout)
			m := e.seqMsg(ch, k, i)
			err := b.Publish(ctx, m)
			cancel()
			if err != nil {
				return fmt.Errorf("Publish(%s on %s): %w", m.ID, m.Channel, err)
			}
		}
	}
	return nil
}

// subscribeOn subscribes on b, closing the subscription when the test ends.
func (e *env) subscribeOn(b calf.Broker, pattern string, h calf.Handler, opts *calf.SubscribeOptions) calf.Subscription {
	e.t.Helper()
	sub, err := b.Subscribe(e.t.Context(), pattern, h, opts)
	if err != nil {
		e.t.Fatalf("Subscribe(%q, %+v): %v", pattern, opts, err)
	}
	e.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// testRestart checks that a group resumes after its broker is closed and
// opened again on the same backing: the messages published and not yet
// handled are handled, in order, including those published while no
// member ran and the one whose handler the close interrupted, and the
// messages handled before the close are not delivered again (unless the
// broker declares [Features.ReplaysPastInterrupted]).
func testRestart(e *env) {
	t := e.t
	ch := e.channel("restart")
	opts := &calf.SubscribeOptions{Group: e.group("restart")}
	const keys, first, second = 3, 10, 5
	l := newLedger(t)
	interrupted := e.id("k0-5")
	blocked := make(chan struct{})
	var once sync.Once
	a := e.b
	e.subscribeOn(a, ch, func(ctx context.Context, m *calf.Message) error {
		if m.ID == interrupted {
			once.Do(func() { close(blocked) })
			<-ctx.Done() // interrupted by the close
			return ctx.Err()
		}
		return l.handle(ctx, m)
	}, opts)
	if err := e.publishSeq(a, ch, keys, 0, first); err != nil {
		t.Fatal(err)
	}
	wait(t, "handler of k0-5", blocked)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := l.handled()

	// Publish more while no member of the group runs.
	p := e.open()
	if err := e.publishSeq(p, ch, keys, first, first+second); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	l.resetDeliveries()
	c := e.open()
	e.subscribeOn(c, ch, l.handle, opts)
	l.waitEffects("every message after the restart", keys*(first+second))
	l.check(keys, first+second)
	if e.f.ReplaysPastInterrupted {
		return // handled ones may come again; the ledger had each effect once, in order
	}
	for _, id := range before {
		if n := l.deliveriesOf(id); n > 0 {
			t.Errorf("message %s, handled before the restart, delivered %d times after it", id, n)
		}
	}
}

// testAckLost checks that a message whose handler succeeded, but whose
// acknowledgement never reached the server because its broker crashed, is
// delivered again to another member, before the later messages of its
// key, and that a handler that records the ids it handled has its effect
// once.
func testAckLost(e *env) {
	t := e.t
	if e.f.Crash == nil {
		t.Skip("Features.Crash is not set: the suite cannot lose an acknowledgement")
	}
	ch := e.channel("acklost")
	opts := &calf.SubscribeOptions{Group: e.group("acklost")}
	const perKey = 5
	l := newLedger(t)
	lost := e.seqMsg(ch, 0, 1)
	processed, releaseCh := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseCh) })
	t.Cleanup(release)
	var once sync.Once
	a := e.b
	e.subscribeOn(a, ch, func(ctx context.Context, m *calf.Message) error {
		err := l.handle(ctx, m)
		if m.ID == lost.ID {
			once.Do(func() {
				close(processed)
				<-releaseCh
			})
		}
		return err // handled; the acknowledgement dies with the broker
	}, opts)
	if err := e.publishSeq(a, ch, 1, 0, perKey); err != nil {
		t.Fatal(err)
	}
	wait(t, "handler of the message whose acknowledgement is lost", processed)
	e.f.Crash(a)
	release()

	b := e.open()
	e.subscribeOn(b, ch, l.handle, opts)
	l.waitFor("every message, and the lost one again", func() bool {
		return l.effected() >= perKey && l.deliveriesOf(lost.ID) >= 2
	})
	l.check(1, perKey)
}

// testRebalance checks that a group keeps every message, each with one
// effect and in order per key, while a member joins it mid-stream and
// another leaves it (crashes, when the suite can crash a broker).
func testRebalance(e *env) {
	t := e.t
	if e.f.SingleInstance {
		t.Skip("Features.SingleInstance: a second broker cannot open the backing")
	}
	ch := e.channel("rebalance")
	opts := &calf.SubscribeOptions{Group: e.group("rebalance")}
	const keys, perKey = 4, 60
	l := newLedger(t)
	pub, a, b := e.open(), e.b, e.open()
	e.subscribeOn(a, ch, l.handle, opts)
	published := make(chan struct{})
	go func() {
		defer close(published)
		if err := e.publishSeq(pub, ch, keys, 0, perKey); err != nil {
			t.Error(err)
		}
	}()
	l.waitEffects("the first member", keys*perKey/4)
	e.subscribeOn(b, ch, l.handle, opts)
	l.waitEffects("two members", keys*perKey/2)
	if e.f.Crash != nil {
		e.f.Crash(a)
	} else if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l.waitEffects("the remaining member", keys*perKey)
	wait(t, "publisher", published)
	l.check(keys, perKey)
}

// testScaleOrder checks per-key order and completeness over 8 keys × 500
// messages while the group scales from one member to two and back to one.
func testScaleOrder(e *env) {
	t := e.t
	if e.f.SingleInstance {
		t.Skip("Features.SingleInstance: a second broker cannot open the backing")
	}
	ch := e.channel("scale")
	opts := &calf.SubscribeOptions{Group: e.group("scale")}
	const keys, perKey = 8, 500
	l := newLedger(t)
	l.checkOverlap = true
	pub, a, b := e.open(), e.b, e.open()
	subA := e.subscribeOn(a, ch, l.handle, opts)
	published := make(chan struct{})
	go func() {
		defer close(published)
		if err := e.publishSeq(pub, ch, keys, 0, perKey); err != nil {
			t.Error(err)
		}
	}()
	l.waitEffects("one member", keys*perKey/4)
	e.subscribeOn(b, ch, l.handle, opts)
	l.waitEffects("two members", keys*perKey*5/8)
	if err := subA.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l.waitEffects("one member again", keys*perKey)
	wait(t, "publisher", published)
	l.check(keys, perKey)
}
