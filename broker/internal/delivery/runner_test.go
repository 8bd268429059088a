package delivery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf"
)

// newRunner returns a runner over h whose dead letters go to parked; a
// publish fails while failPublish holds a positive count, counting down.
func newRunner(h calf.Handler, parked *[]*calf.Message, failPublish *atomic.Int32) *Runner {
	var mu sync.Mutex
	return &Runner{
		Broker:  "test",
		Group:   "g",
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: h,
		Context: context.Background(),
		Policy:  Policy{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }},
		Slots:   make(chan struct{}, 1),
		Publish: func(dl *calf.Message) error {
			if failPublish != nil && failPublish.Add(-1) >= 0 {
				return errors.New("publish failed")
			}
			mu.Lock()
			*parked = append(*parked, dl)
			mu.Unlock()
			return nil
		},
		ParkBackoff: func(int) time.Duration { return time.Millisecond },
	}
}

func never() bool { return false }

func TestCallRecoversPanic(t *testing.T) {
	r := newRunner(func(context.Context, *calf.Message) error { panic("boom") }, nil, nil)
	err := r.Call(&calf.Message{Channel: "c"})
	if err == nil || !strings.Contains(err.Error(), "test: handler panicked on c: boom") {
		t.Fatalf("Call = %v, want the panic as an error", err)
	}
}

func TestCallGivesTheMessageInContext(t *testing.T) {
	msg := &calf.Message{ID: "m", Channel: "c"}
	r := newRunner(func(ctx context.Context, m *calf.Message) error {
		if got, _ := calf.MessageFromContext(ctx); got != m {
			return errors.New("message not in the context")
		}
		return nil
	}, nil, nil)
	if err := r.Call(msg); err != nil {
		t.Fatal(err)
	}
}

func TestDeliverRetriesThenSucceeds(t *testing.T) {
	var attempts []int
	r := newRunner(func(_ context.Context, m *calf.Message) error {
		attempts = append(attempts, m.Metadata.Attempt)
		if len(attempts) < 3 {
			return errors.New("not yet")
		}
		return nil
	}, nil, nil)
	msg := &calf.Message{ID: "m", Channel: "c"}
	if got := r.Deliver(msg, NewTracker(1), Stop{Halted: never}); got != Handled {
		t.Fatalf("outcome %v, want Handled", got)
	}
	if len(attempts) != 3 || attempts[0] != 1 || attempts[2] != 3 {
		t.Errorf("attempts %v, want [1 2 3]", attempts)
	}
	if msg.Metadata.Attempt != 0 {
		t.Errorf("the caller's message was changed: attempt %d", msg.Metadata.Attempt)
	}
}

func TestDeliverParksAfterTheLastAttempt(t *testing.T) {
	var parked []*calf.Message
	var fail atomic.Int32
	fail.Store(2) // the first two tries to park fail
	calls := 0
	r := newRunner(func(context.Context, *calf.Message) error { calls++; return errors.New("always") }, &parked, &fail)
	got := r.Deliver(&calf.Message{ID: "m", Channel: "c"}, NewTracker(2), Stop{Halted: never})
	if got != Parked {
		t.Fatalf("outcome %v, want Parked", got)
	}
	if calls != 2 {
		t.Errorf("%d calls from delivery 2 with 3 attempts, want 2", calls)
	}
	if len(parked) != 1 || parked[0].Channel != calf.DeadLetterChannel {
		t.Fatalf("parked %v, want one dead letter", parked)
	}
}

func TestDeliverStops(t *testing.T) {
	stop := make(chan struct{})
	var halted atomic.Bool
	called := make(chan struct{}, 1)
	r := newRunner(func(context.Context, *calf.Message) error {
		called <- struct{}{}
		return errors.New("fails")
	}, nil, nil)
	r.Policy.Backoff = func(int) time.Duration { return time.Hour }
	done := make(chan Outcome)
	go func() {
		done <- r.Deliver(&calf.Message{ID: "m", Channel: "c"}, NewTracker(1), Stop{C: stop, Halted: halted.Load})
	}()
	<-called
	close(stop) // ends the wait before the retry
	select {
	case got := <-done:
		if got != Interrupted {
			t.Fatalf("outcome %v, want Interrupted", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Deliver did not stop")
	}

	// A failure that comes from the stopping uses up nothing.
	halted.Store(true)
	tr := NewTracker(1)
	if got := r.Deliver(&calf.Message{ID: "m", Channel: "c"}, tr, Stop{C: make(chan struct{}), Halted: halted.Load}); got != Interrupted {
		t.Fatalf("outcome %v when halted, want Interrupted", got)
	}
	if tr.Attempt != 1 {
		t.Errorf("attempt %d after a halted failure, want 1", tr.Attempt)
	}
}

func TestParkRetriedGivesUp(t *testing.T) {
	var parked []*calf.Message
	var fail atomic.Int32
	fail.Store(1 << 30)
	r := newRunner(nil, &parked, &fail)
	tries := 0
	giveUp := func() bool { tries++; return tries == 3 }
	if r.ParkRetried(&calf.Message{ID: "m", Channel: "c"}, errors.New("x"), 3, Stop{Halted: never, GiveUp: giveUp}) {
		t.Fatal("ParkRetried reported the message settled though every publish failed")
	}
	if tries != 3 {
		t.Errorf("gave up after %d waits, want 3", tries)
	}
}

func TestParkDropsADeadLetter(t *testing.T) {
	var parked []*calf.Message
	r := newRunner(nil, &parked, nil)
	if !r.Park(&calf.Message{ID: "d", Channel: calf.DeadLetterChannel}, errors.New("x"), 1) {
		t.Fatal("a dead letter was not settled")
	}
	if len(parked) != 0 {
		t.Errorf("a dead letter was parked in turn: %v", parked)
	}
}

func TestSlotsBoundTheCalls(t *testing.T) {
	// In a bubble, each call holds its slot for a millisecond of the
	// bubble's clock while every other call that can start has started.
	synctest.Test(t, func(t *testing.T) {
		var running, most atomic.Int32
		r := newRunner(func(context.Context, *calf.Message) error {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return nil
		}, nil, nil)
		r.Slots = make(chan struct{}, 2)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { r.Deliver(&calf.Message{ID: "m", Channel: "c"}, NewTracker(1), Stop{Halted: never}) })
		}
		wg.Wait()
		if got := most.Load(); got != 2 {
			t.Errorf("at most %d calls at once, want 2", got)
		}
	})
}
