package brokertest_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
)

func newMemory(t *testing.T) *memory.Broker {
	b := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func drain(t *testing.T, b *memory.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), brokertest.Timeout)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// call is one handler call.
type call struct {
	ID      string
	Attempt int
}

// calls records handler calls.
type calls struct {
	mu   sync.Mutex
	list []call
}

func (c *calls) add(m *calf.Message) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, call{m.ID, m.Metadata.Attempt})
	return len(c.list)
}

func (c *calls) get() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.list...)
}

func TestDuplicatePublishes(t *testing.T) {
	tests := []struct {
		n, copies int
	}{
		{3, 3},
		{1, 1},
		{0, 1},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			inner := newMemory(t)
			b := brokertest.DuplicatePublishes(inner, tc.n)
			if u, ok := b.(interface{ Unwrap() calf.Broker }); !ok || u.Unwrap() != inner {
				t.Error("Unwrap does not return the wrapped broker")
			}
			var group, private calls
			for _, s := range []struct {
				c    *calls
				opts *calf.SubscribeOptions
			}{{&group, &calf.SubscribeOptions{Group: "g"}}, {&private, nil}} {
				sub, err := b.Subscribe(t.Context(), "dup.>", func(_ context.Context, m *calf.Message) error {
					s.c.add(m)
					return nil
				}, s.opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sub.Close() })
			}
			var want []call
			for i := range 3 {
				id := "m" + strconv.Itoa(i)
				if err := b.Publish(t.Context(), &calf.Message{ID: id, Channel: "dup.x", Key: "k"}); err != nil {
					t.Fatal(err)
				}
				for range tc.copies {
					want = append(want, call{id, 1})
				}
			}
			drain(t, inner)
			for name, c := range map[string]*calls{"group": &group, "private": &private} {
				if diff := cmp.Diff(want, c.get()); diff != "" {
					t.Errorf("%s subscription's calls (-want +got):\n%s", name, diff)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Publish(t.Context(), &calf.Message{ID: "late", Channel: "dup.x"}); !errors.Is(err, calf.ErrClosed) {
				t.Errorf("Publish after Close = %v, want ErrClosed", err)
			}
		})
	}
}

func TestDuplicateDeliveries(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		failOn int // the handler call that fails, counting from 1; 0 for none
		want   []call
	}{
		{"no failure", 2, 0, []call{{"m0", 1}, {"m0", 1}, {"m1", 1}, {"m1", 1}}},
		{"first call fails", 2, 1, []call{{"m0", 1}, {"m0", 1}, {"m0", 2}, {"m0", 2}, {"m1", 1}, {"m1", 1}}},
		{"second call fails", 2, 2, []call{{"m0", 1}, {"m0", 1}, {"m0", 2}, {"m0", 2}, {"m1", 1}, {"m1", 1}}},
		{"three calls", 3, 0, []call{{"m0", 1}, {"m0", 1}, {"m0", 1}, {"m1", 1}, {"m1", 1}, {"m1", 1}}},
		{"n below 1", -1, 0, []call{{"m0", 1}, {"m1", 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inner := newMemory(t)
			b := brokertest.DuplicateDeliveries(inner, tc.n)
			if u, ok := b.(interface{ Unwrap() calf.Broker }); !ok || u.Unwrap() != inner {
				t.Error("Unwrap does not return the wrapped broker")
			}
			var c calls
			var mu sync.Mutex
			msgs := map[*calf.Message]int{}
			sub, err := b.Subscribe(t.Context(), "dd.x", func(ctx context.Context, m *calf.Message) error {
				if in, ok := calf.MessageFromContext(ctx); !ok || in != m {
					t.Errorf("context does not carry message %s", m.ID)
					return nil
				}
				mu.Lock()
				msgs[m]++
				mu.Unlock()
				if c.add(m) == tc.failOn {
					return errors.New("fail")
				}
				return nil
			}, &calf.SubscribeOptions{Group: "g"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Close() })
			for i := range 2 {
				if err := b.Publish(t.Context(), &calf.Message{ID: "m" + strconv.Itoa(i), Channel: "dd.x", Key: "k"}); err != nil {
					t.Fatal(err)
				}
			}
			drain(t, inner)
			if diff := cmp.Diff(tc.want, c.get()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			// Every call of one delivery gets the same message.
			for m, n := range msgs {
				if want := max(tc.n, 1); n != want {
					t.Errorf("message %s attempt %d passed to %d calls, want %d", m.ID, m.Metadata.Attempt, n, want)
				}
			}
		})
	}
}

func TestDuplicateDeliveriesNilHandler(t *testing.T) {
	b := brokertest.DuplicateDeliveries(newMemory(t), 2)
	if _, err := b.Subscribe(t.Context(), "a.b", nil, nil); err == nil {
		t.Error("Subscribe with a nil handler succeeded")
	}
}

// Handled reports each delivery after its handler returned, with the
// handler's error: a failed attempt, then the attempt that succeeded.
func TestHandled(t *testing.T) {
	inner := newMemory(t)
	type report struct {
		ID       string
		Attempt  int
		Failed   bool
		Returned bool // the handler had returned
	}
	var mu sync.Mutex
	var returned int
	var got []report
	b := brokertest.Handled(inner, func(m *calf.Message, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, report{m.ID, m.Metadata.Attempt, err != nil, returned == len(got)+1})
	})
	if u, ok := b.(interface{ Unwrap() calf.Broker }); !ok || u.Unwrap() != inner {
		t.Error("Unwrap does not return the wrapped broker")
	}
	sub, err := b.Subscribe(t.Context(), "h.x", func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		returned++
		mu.Unlock()
		if m.Metadata.Attempt == 1 {
			return errors.New("fail")
		}
		return nil
	}, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	if err := b.Publish(t.Context(), &calf.Message{ID: "m0", Channel: "h.x", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	drain(t, inner)
	mu.Lock()
	defer mu.Unlock()
	want := []report{{"m0", 1, true, true}, {"m0", 2, false, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if _, err := b.Subscribe(t.Context(), "a.b", nil, nil); err == nil {
		t.Error("Subscribe with a nil handler succeeded")
	}
}
