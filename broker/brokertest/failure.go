package brokertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf"
)

// testRedelivery checks that a failed message is redelivered with its
// attempt counted, and that the next message of its key waits for it.
func testRedelivery(e *env) {
	t := e.t
	ch := e.channel("retry")
	var (
		mu    sync.Mutex
		calls []delivery
	)
	first, second := e.id("first"), e.id("second")
	got := newCollector()
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		mu.Lock()
		calls = append(calls, delivery{m.ID, m.Metadata.Attempt})
		mu.Unlock()
		if m.ID == first && m.Metadata.Attempt < 3 {
			return fmt.Errorf("attempt %d fails", m.Metadata.Attempt)
		}
		return got.handle(ctx, m)
	}, &calf.SubscribeOptions{Group: e.group("retry"), MaxAttempts: 5})
	e.publish(e.msg(ch, "k", first), e.msg(ch, "k", second))
	got.waitID(t, "second message", second)
	want := []delivery{{first, 1}, {first, 2}, {first, 3}, {second, 1}}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// testDeadLetter checks that a message is parked on the dead-letter
// channel after its last attempt, or at once for a permanent error, with a
// complete DeadLetter, and that the next message of its key and the other
// keys are handled.
func testDeadLetter(e *env) {
	tests := []struct {
		name        string
		maxAttempts int
		err         error
		attempts    int
	}{
		{"max attempts", 3, errors.New("boom"), 3},
		{"one attempt", 1, errors.New("no retries"), 1},
		{"permanent", 5, calf.Permanent(errors.New("cannot decode")), 1},
	}
	for i, tc := range tests {
		e.t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			ch := e.channel("dead", strconv.Itoa(i))
			group := e.group("dead" + strconv.Itoa(i))
			dead := newCollector()
			e.subscribe(calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
				var dl calf.DeadLetter
				if err := json.Unmarshal(m.Data, &dl); err != nil {
					t.Errorf("dead letter %s does not decode: %v", m.ID, err)
					return nil
				}
				if dl.Message != nil && dl.Message.Channel == ch {
					dead.add(m)
				}
				return nil
			}, nil)

			poison, next := e.msg(ch, "poison", e.id(fmt.Sprintf("d%d-poison", i))), e.msg(ch, "poison", e.id(fmt.Sprintf("d%d-next", i)))
			const others = 10
			var (
				mu    sync.Mutex
				calls []delivery
			)
			othersDone := make(chan struct{})
			var handled atomic.Int32
			got := newCollector()
			e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
				mu.Lock()
				calls = append(calls, delivery{m.ID, m.Metadata.Attempt})
				mu.Unlock()
				if m.ID != poison.ID {
					if m.Key == "other" && handled.Add(1) == others {
						close(othersDone)
					}
					return got.handle(ctx, m)
				}
				if m.Metadata.Attempt == tc.attempts && !e.f.SerializedKeys {
					// Hold the key until the other key is done: a
					// failing key must not hold up the others.
					select {
					case <-othersDone:
					case <-ctx.Done():
					case <-time.After(Timeout):
						t.Errorf("key other was not handled while key poison was held")
					}
				}
				return tc.err
			}, &calf.SubscribeOptions{Group: group, MaxAttempts: tc.maxAttempts})

			e.publish(poison, next)
			for j := range others {
				e.publish(e.msg(ch, "other", e.id(fmt.Sprintf("d%d-other%d", i, j))))
			}
			got.waitN(t, "the next message of the key and the other key", others+1)
			dls := dead.waitN(t, "dead letter", 1)
			mu.Lock()
			var poisonCalls []int
			lastPoison, nextAt := -1, -1
			for j, c := range calls {
				switch c.ID {
				case poison.ID:
					poisonCalls = append(poisonCalls, c.Attempt)
					lastPoison = j
				case next.ID:
					nextAt = j
				}
			}
			mu.Unlock()
			var wantCalls []int
			for a := 1; a <= tc.attempts; a++ {
				wantCalls = append(wantCalls, a)
			}
			if diff := cmp.Diff(wantCalls, poisonCalls); diff != "" {
				t.Errorf("attempts of the failing message (-want +got):\n%s", diff)
			}
			if nextAt < lastPoison {
				t.Errorf("the next message of the key was handled before the failing one was parked")
			}

			dm := dls[0]
			if dm.Channel != calf.DeadLetterChannel || dm.Key != poison.Key || dm.ID != "deadletter."+group+"."+poison.ID {
				t.Errorf("dead letter message: id %q channel %q key %q; want id %q, channel %q, key %q",
					dm.ID, dm.Channel, dm.Key, "deadletter."+group+"."+poison.ID, calf.DeadLetterChannel, poison.Key)
			}
			var dl calf.DeadLetter
			if err := json.Unmarshal(dm.Data, &dl); err != nil {
				t.Fatal(err)
			}
			want := calf.DeadLetter{
				Message:   poison,
				Group:     group,
				Error:     tc.err.Error(),
				Attempts:  tc.attempts,
				Permanent: calf.IsPermanent(tc.err),
			}
			if diff := cmp.Diff(want, dl, cmpopts.IgnoreFields(calf.DeadLetter{}, "Time")); diff != "" {
				t.Errorf("dead letter (-want +got):\n%s", diff)
			}
			if dl.Time.IsZero() {
				t.Error("dead letter has no time")
			}
		})
	}
}

// testHandlerPanic checks that the broker recovers a handler's panic as a
// failure of that attempt: the message is retried, then parked with the
// panic in its dead letter's error, and the subscription goes on handling
// the other messages. The broker is the one place a panic is recovered on
// the handler path (calf.Client does not).
func testHandlerPanic(e *env) {
	t := e.t
	ch := e.channel("panic")
	group := e.group("panic")
	dead := newCollector()
	e.subscribe(calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err == nil && dl.Message != nil && dl.Message.Channel == ch {
			dead.add(m)
		}
		return nil
	}, nil)
	poison, next := e.msg(ch, "k", e.id("panics")), e.msg(ch, "k", e.id("after"))
	var (
		mu       sync.Mutex
		attempts []int
	)
	got := newCollector()
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		if m.ID != poison.ID {
			return got.handle(ctx, m)
		}
		mu.Lock()
		attempts = append(attempts, m.Metadata.Attempt)
		mu.Unlock()
		panic("handler explodes")
	}, &calf.SubscribeOptions{Group: group, MaxAttempts: 2})
	e.publish(poison, next)
	got.waitID(t, "the message after the panicking one", next.ID)
	dls := dead.waitN(t, "dead letter", 1)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]int{1, 2}, attempts); diff != "" {
		t.Errorf("attempts of the panicking message (-want +got):\n%s", diff)
	}
	var dl calf.DeadLetter
	if err := json.Unmarshal(dls[0].Data, &dl); err != nil {
		t.Fatal(err)
	}
	if dl.Attempts != 2 || !strings.Contains(dl.Error, "handler explodes") {
		t.Errorf("dead letter: %d attempts, error %q; want 2 attempts and the panic's value", dl.Attempts, dl.Error)
	}
}

// testOutage checks that failures of a service that cannot be reached
// ([calf.IsUnavailable]) use up no attempt: a message whose handler fails
// that way more times than its MaxAttempts is handled when the outage
// ends, not parked, and keeps its attempt number.
func testOutage(e *env) {
	t := e.t
	ch := e.channel("outage")
	id := e.id("outage")
	var (
		mu       sync.Mutex
		attempts []int
	)
	dead := newCollector()
	e.subscribe(calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if json.Unmarshal(m.Data, &dl) == nil && dl.Message != nil && dl.Message.ID == id {
			dead.add(m)
		}
		return nil
	}, nil)
	got := newCollector()
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		mu.Lock()
		attempts = append(attempts, m.Metadata.Attempt)
		n := len(attempts)
		mu.Unlock()
		if n <= 3 {
			return fmt.Errorf("load state: %w", calf.Unavailable(errors.New("connection refused")))
		}
		return got.handle(ctx, m)
	}, &calf.SubscribeOptions{Group: e.group("outage"), MaxAttempts: 2})
	e.publish(e.msg(ch, "k", id))
	got.waitID(t, "the message after the outage", id)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]int{1, 1, 1, 1}, attempts); diff != "" {
		t.Errorf("attempts through the outage (-want +got):\n%s", diff)
	}
	if n := len(dead.snapshot()); n != 0 {
		t.Errorf("%d dead letters for a message that failed only through an outage", n)
	}
}

// testDeadLetterKept checks that a dead letter whose handler fails (a
// recorder whose store is down) is neither parked again nor dropped, but
// delivered again until its handler succeeds, even past MaxAttempts.
func testDeadLetterKept(e *env) {
	t := e.t
	ch := e.channel("kept")
	group := e.group("kept")
	id := e.id("kept")
	var fails atomic.Int32
	recorded := newCollector()
	e.subscribe(calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if json.Unmarshal(m.Data, &dl) != nil || dl.Message == nil || dl.Message.Channel != ch {
			return nil
		}
		if fails.Add(1) <= 4 {
			return calf.Permanent(errors.New("the store is down"))
		}
		recorded.add(m)
		return nil
	}, &calf.SubscribeOptions{Group: e.group("kept-recorder"), MaxAttempts: 2})
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		return calf.Permanent(errors.New("poison"))
	}, &calf.SubscribeOptions{Group: group})
	e.publish(e.msg(ch, "k", id))
	dls := recorded.waitN(t, "the dead letter, recorded after four failures", 1)
	if want := "deadletter." + group + "." + id; dls[0].ID != want {
		t.Errorf("recorded %s, want %s", dls[0].ID, want)
	}
	if n := fails.Load(); n != 5 {
		t.Errorf("the dead letter was delivered %d times, want 5", n)
	}
}
