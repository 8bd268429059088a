package brokertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf"
)

// testSlowKeyHoldsNoOther checks that a handler that takes long for one
// key holds up no other key, not even the keys that share its partition:
// the handler of key "slow" returns only once 200 other keys have been
// handled. With any partition count up to 64, some of those keys share
// the slow key's partition (the chance that none does is below 1 in 10⁵).
func testSlowKeyHoldsNoOther(e *env) {
	t := e.t
	if e.f.SerializedKeys {
		t.Skip("Features.SerializedKeys: the broker may handle different keys one after another")
	}
	const others = 200
	ch := e.channel("slowkey")
	var handled atomic.Int32
	allDone := make(chan struct{})
	closeAll := sync.OnceFunc(func() { close(allDone) })
	slowDone := make(chan error, 1)
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		if m.Key != "slow" {
			if handled.Add(1) == others {
				closeAll()
			}
			return nil
		}
		var err error
		select {
		case <-allDone:
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(Timeout):
			err = fmt.Errorf("%d of %d other keys handled while the slow key's handler ran", handled.Load(), others)
		}
		select {
		case slowDone <- err:
		default:
		}
		return nil
	}, &calf.SubscribeOptions{Group: e.group("slowkey")})
	e.publish(e.msg(ch, "slow", e.id("slow")))
	for i := range others {
		e.publish(e.msg(ch, fmt.Sprintf("k%d", i), e.id(fmt.Sprintf("k%d", i))))
	}
	if err := wait(t, "handler of the slow key", slowDone); err != nil {
		t.Fatal(err)
	}
}

// testKeyOrderUnderFaults checks per-key order and completeness over 200
// keys × 50 messages in a group of two members whose handlers take a
// random time and fail at random (and are retried): each key's messages
// have their effects one at a time, in publish order, once each.
func testKeyOrderUnderFaults(e *env) {
	t := e.t
	const keys, perKey = 200, 50
	ch := e.channel("faults")
	opts := &calf.SubscribeOptions{Group: e.group("faults"), MaxAttempts: 30}
	l := newLedger(t)
	l.checkOverlap = true
	var failures atomic.Int32
	h := func(ctx context.Context, m *calf.Message) error {
		time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Millisecond))))
		if rand.IntN(20) == 0 {
			failures.Add(1)
			return errors.New("a random failure")
		}
		return l.handle(ctx, m)
	}
	e.subscribe(ch, h, opts)
	e.subscribe(ch, h, opts)
	if err := e.publishSeq(e.b, ch, keys, 0, perKey); err != nil {
		t.Fatal(err)
	}
	l.waitEffects("every message", keys*perKey)
	l.check(keys, perKey)
	if failures.Load() == 0 {
		t.Error("no handler failed: the test did not exercise retries")
	}
}

// testCrashWithKeysInFlight checks that a member that crashes while it
// holds many keys in flight loses nothing: another member handles every
// message of every key, the interrupted ones included, in order per key.
func testCrashWithKeysInFlight(e *env) {
	t := e.t
	if e.f.Crash == nil {
		t.Skip("Features.Crash is not set: the suite cannot crash a member")
	}
	if e.f.SerializedKeys {
		t.Skip("Features.SerializedKeys: the broker may handle different keys one after another, so a member cannot hold many in flight")
	}
	const keys, perKey, stuckAt = 64, 10, 3
	ch := e.channel("crashinflight")
	opts := &calf.SubscribeOptions{Group: e.group("crashinflight")}
	l := newLedger(t)
	var stuck atomic.Int32
	allStuck := make(chan struct{})
	closeAll := sync.OnceFunc(func() { close(allStuck) })
	crashed := make(chan struct{})
	a := e.b
	e.subscribeOn(a, ch, func(ctx context.Context, m *calf.Message) error {
		var i int
		if _, err := fmt.Sscan(string(m.Data), &i); err == nil && i == stuckAt {
			// Every key stops here, in flight, until the member crashes.
			if stuck.Add(1) == keys {
				closeAll()
			}
			select {
			case <-crashed:
			case <-ctx.Done():
			}
			return errors.New("interrupted by the crash")
		}
		return l.handle(ctx, m)
	}, opts)
	if err := e.publishSeq(a, ch, keys, 0, perKey); err != nil {
		t.Fatal(err)
	}
	wait(t, fmt.Sprintf("%d keys in flight at once", keys), allStuck)
	e.f.Crash(a)
	close(crashed)

	b := e.open()
	e.subscribeOn(b, ch, l.handle, opts)
	l.waitEffects("every message after the crash", keys*perKey)
	l.check(keys, perKey)
}
