package timers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/teststores"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/internal/timers"
	"github.com/calf-go/calf/store"
)

// clock is a clock that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// heard records the events emitted on the channel "t.fired".
type heard struct {
	mu  sync.Mutex
	ids []string
	msg map[string]*calf.Message
}

func (h *heard) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, x := range h.ids {
		if x == id {
			n++
		}
	}
	return n
}

func (h *heard) total() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.ids) }

func setup(t *testing.T, s store.Store) (*calf.Client, *heard) {
	t.Helper()
	c := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { _ = c.Close() })
	h := &heard{msg: map[string]*calf.Message{}}
	err := c.Handle(context.Background(), "t.fired", func(ctx context.Context, m *calf.Message) error {
		h.mu.Lock()
		h.ids = append(h.ids, m.ID)
		h.msg[m.ID] = m
		h.mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, h
}

var stores = teststores.Open("timers", teststores.Memory, teststores.SQLite, teststores.Postgres, teststores.Redis)

func TestTimers(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Run("fires once when due", func(t *testing.T) { testFiresWhenDue(t, open(t)) })
			t.Run("start is idempotent", func(t *testing.T) { testStartTwice(t, open(t)) })
			t.Run("stop", func(t *testing.T) { testStop(t, open(t)) })
			t.Run("two firers", func(t *testing.T) { testTwoFirers(t, open(t)) })
			t.Run("leases", func(t *testing.T) { testLeases(t, open(t)) })
			t.Run("half started", func(t *testing.T) { testHalfStarted(t, open(t)) })
			t.Run("pages in order", func(t *testing.T) { testPagesInOrder(t, open(t)) })
			t.Run("lease runs out in a page", func(t *testing.T) { testLeaseRunsOutInPage(t, open(t)) })
		})
	}
}

func testFiresWhenDue(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now})
	for i, d := range []time.Duration{3 * time.Minute, time.Minute, 2 * time.Minute} {
		created, err := svc.Start(ctx, timers.Timer{ID: fmt.Sprintf("run1.sleep.%d", i), Due: clk.Now().Add(d), Channel: "t.fired",
			Data: json.RawMessage(`{"step":` + fmt.Sprint(i) + `}`), Key: "run1", EventID: fmt.Sprintf("run1.wake.%d", i),
			Metadata: calf.Metadata{RunID: "run1", CorrelationID: "run1"}})
		if err != nil || !created {
			t.Fatalf("start %d: %v, %v", i, created, err)
		}
	}
	n, next, err := svc.Fire(ctx)
	if err != nil || n != 0 || !next.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("before due: fired %d, next %v, %v; want 0, in a minute", n, next, err)
	}
	clk.Add(2*time.Minute + time.Second)
	n, next, err = svc.Fire(ctx)
	if err != nil || n != 2 || !next.Equal(clk.Now().Add(time.Minute-time.Second)) {
		t.Fatalf("after 2m1s: fired %d, next %v, %v; want 2 and the third in 59s", n, next, err)
	}
	testwait.For(t, 5*time.Second, "two events", func() bool { return h.total() == 2 })
	h.mu.Lock()
	if h.ids[0] != "run1.wake.1" || h.ids[1] != "run1.wake.2" {
		t.Errorf("events %v, want the earliest first: run1.wake.1, run1.wake.2", h.ids)
	}
	m := h.msg["run1.wake.1"]
	h.mu.Unlock()
	if string(m.Data) != `{"step":1}` || m.Key != "run1" || m.Metadata.RunID != "run1" {
		t.Errorf("event data %s key %q run %q", m.Data, m.Key, m.Metadata.RunID)
	}
	left, err := svc.List(ctx, "run1.", "", 0)
	if err != nil || len(left) != 1 || left[0].ID != "run1.sleep.0" {
		t.Fatalf("left %v, %v: want run1.sleep.0 only", left, err)
	}
	if _, err := svc.Get(ctx, "run1.sleep.1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fired timer: %v, want not found", err)
	}
	clk.Add(time.Hour)
	if n, next, err := svc.Fire(ctx); err != nil || n != 1 || !next.IsZero() {
		t.Fatalf("last: fired %d, next %v, %v", n, next, err)
	}
	if n, _, _ := svc.Fire(ctx); n != 0 {
		t.Errorf("fired again: %d", n)
	}
	due, err := s.List(ctx, timers.KindDue, "", "", 0)
	if err != nil || len(due) != 0 {
		t.Errorf("index entries left: %d, %v", len(due), err)
	}
	testwait.For(t, 5*time.Second, "three events", func() bool { return h.total() == 3 })
}

func testStartTwice(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now})
	tm := timers.Timer{ID: "a", Due: clk.Now().Add(time.Minute), Channel: "t.fired"}
	if ok, err := svc.Start(ctx, tm); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// The same id again, even with another due time, changes nothing.
	tm.Due = clk.Now().Add(time.Hour)
	if ok, err := svc.Start(ctx, tm); ok || err != nil {
		t.Fatalf("second start: %v, %v; want false", ok, err)
	}
	due, err := s.List(ctx, timers.KindDue, "", "", 0)
	if err != nil || len(due) != 1 {
		t.Fatalf("index entries %d, %v; want 1", len(due), err)
	}
	clk.Add(2 * time.Minute)
	if n, _, err := svc.Fire(ctx); n != 1 || err != nil {
		t.Fatalf("fired %d, %v", n, err)
	}
	testwait.For(t, 5*time.Second, "the event", func() bool { return h.count("a") == 1 })
	for _, bad := range []timers.Timer{{Due: clk.Now(), Channel: "x"}, {ID: "b", Due: clk.Now()}, {ID: "c", Channel: "x"}} {
		if _, err := svc.Start(ctx, bad); !errors.Is(err, timers.ErrInvalid) {
			t.Errorf("start %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func testStop(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now})
	for _, id := range []string{"keep", "stop"} {
		if _, err := svc.Start(ctx, timers.Timer{ID: id, Due: clk.Now().Add(time.Minute), Channel: "t.fired"}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := svc.Stop(ctx, "stop"); !ok || err != nil {
		t.Fatalf("stop: %v, %v", ok, err)
	}
	if ok, err := svc.Stop(ctx, "stop"); ok || err != nil {
		t.Fatalf("stop again: %v, %v; want false", ok, err)
	}
	clk.Add(time.Hour)
	if n, _, err := svc.Fire(ctx); n != 1 || err != nil {
		t.Fatalf("fired %d, %v; want the one kept", n, err)
	}
	testwait.For(t, 5*time.Second, "the kept timer's event", func() bool { return h.count("keep") == 1 })
	if h.count("stop") != 0 {
		t.Error("a stopped timer fired")
	}
}

// Two processes fire the timers of one store at once: each timer is
// fired by one of them.
func testTwoFirers(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	a := timers.New(s, c, timers.Options{Now: clk.Now, Owner: "a", Page: 16})
	b := timers.New(s, c, timers.Options{Now: clk.Now, Owner: "b", Page: 16})
	const n = 100
	for i := range n {
		if _, err := a.Start(ctx, timers.Timer{ID: fmt.Sprintf("t%03d", i), Due: clk.Now().Add(time.Duration(i) * time.Millisecond), Channel: "t.fired"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Second)
	var fired atomic.Int64
	var wg sync.WaitGroup
	for _, svc := range []*timers.Service{a, b} {
		wg.Go(func() {
			for range 3 {
				k, _, err := svc.Fire(ctx)
				if err != nil {
					t.Error(err)
				}
				fired.Add(int64(k))
			}
		})
	}
	wg.Wait()
	if fired.Load() != n {
		t.Errorf("fired %d, want %d", fired.Load(), n)
	}
	testwait.For(t, 10*time.Second, "every event", func() bool { return h.total() >= n })
	for i := range n {
		if k := h.count(fmt.Sprintf("t%03d", i)); k != 1 {
			t.Errorf("t%03d emitted %d times", i, k)
		}
	}
}

// A timer leased by a live process is left to it; once the lease runs
// out (its process died before removing the timer), another fires it,
// with the same event id.
func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now, Owner: "b", Lease: 5 * time.Second})
	due := clk.Now().Add(time.Second)
	if _, err := svc.Start(ctx, timers.Timer{ID: "held", Due: due, Channel: "t.fired", EventID: "held.fired"}); err != nil {
		t.Fatal(err)
	}
	entries, err := s.List(ctx, timers.KindDue, "", "", 0)
	if err != nil || len(entries) != 1 {
		t.Fatal(entries, err)
	}
	// Process a took the timer and died.
	l, _ := json.Marshal(map[string]any{"owner": "a", "until": clk.Now().Add(10 * time.Second)})
	if _, err := s.Put(ctx, timers.KindDue, entries[0].ID, l, entries[0].Version); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	if n, _, err := svc.Fire(ctx); n != 0 || err != nil {
		t.Fatalf("within a's lease: fired %d, %v; want 0", n, err)
	}
	clk.Add(10 * time.Second)
	if n, _, err := svc.Fire(ctx); n != 1 || err != nil {
		t.Fatalf("after a's lease: fired %d, %v; want 1", n, err)
	}
	testwait.For(t, 5*time.Second, "the event", func() bool { return h.count("held.fired") == 1 })
}

// An index entry whose timer was never written (a start that failed
// halfway) is removed, and fires nothing.
func testHalfStarted(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now})
	if _, err := s.Put(ctx, timers.KindDue, fmt.Sprintf("%019d/ghost", clk.Now().UnixNano()), []byte("{}"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, timers.KindDue, "garbage", []byte("{}"), 0); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if n, next, err := svc.Fire(ctx); n != 0 || err != nil || !next.IsZero() {
		t.Fatalf("fired %d, next %v, %v", n, next, err)
	}
	if entries, _ := s.List(ctx, timers.KindDue, "", "", 0); len(entries) != 0 {
		t.Errorf("entries left: %v", entries)
	}
	if h.total() != 0 {
		t.Errorf("events: %d", h.total())
	}
}

// A backlog of overdue timers, several pages of the index, fires in one
// pass, each once, the earliest first.
func testPagesInOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now, Page: 16})
	const n = 50
	for i := range n {
		// Started in reverse order: the index, not the start, orders them
		// (the events of one key arrive in the order sent).
		k := n - 1 - i
		if _, err := svc.Start(ctx, timers.Timer{ID: fmt.Sprintf("p%03d", k), Due: clk.Now().Add(time.Duration(k) * time.Millisecond), Channel: "t.fired", Key: "one key"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Second)
	if k, next, err := svc.Fire(ctx); k != n || !next.IsZero() || err != nil {
		t.Fatalf("fired %d, next %v, %v; want %d, none left", k, next, err, n)
	}
	testwait.For(t, 10*time.Second, "every event", func() bool { return h.total() >= n })
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range h.ids {
		if want := fmt.Sprintf("p%03d", i); id != want {
			t.Fatalf("event %d is %s, want %s: the earliest first", i, id, want)
		}
	}
	if len(h.ids) != n {
		t.Errorf("%d events, want %d", len(h.ids), n)
	}
}

// A page whose firing outlasts its lease stops there: the timers left are
// fired by a later pass, each once.
func testLeaseRunsOutInPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	c, h := setup(t, s)
	start := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	const n = 20
	svc := timers.New(s, c, timers.Options{Now: clk.Now, Page: n, Lease: 5 * time.Second})
	for i := range n {
		if _, err := svc.Start(ctx, timers.Timer{ID: fmt.Sprintf("l%03d", i), Due: start.Add(time.Duration(i) * time.Millisecond), Channel: "t.fired"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Second)
	// Each read of the clock after the first takes a second: the lease
	// taken at the start of the pass runs out after a few events.
	reads := 0
	slow := timers.New(s, c, timers.Options{Now: func() time.Time {
		reads++
		if reads > 1 {
			clk.Add(time.Second)
		}
		return clk.Now()
	}, Page: n, Lease: 5 * time.Second, Owner: "slow"})
	k, _, err := slow.Fire(ctx)
	if err != nil || k == 0 || k >= n {
		t.Fatalf("the slow pass fired %d, %v; want some, not all, of %d", k, err, n)
	}
	// Another process takes the rest once the lease has run out.
	clk.Add(10 * time.Second)
	rest, _, err := svc.Fire(ctx)
	if err != nil || k+rest != n {
		t.Fatalf("then fired %d, %v; want the %d left", rest, err, n-k)
	}
	testwait.For(t, 10*time.Second, "every event", func() bool { return h.total() >= n })
	for i := range n {
		if got := h.count(fmt.Sprintf("l%03d", i)); got != 1 {
			t.Errorf("l%03d emitted %d times", i, got)
		}
	}
}

// Run fires a timer when it falls due, on the real clock, and one
// started in its process at once.
func TestRunFiresOnTime(t *testing.T) {
	s := stores[teststores.SQLite](t)
	c, h := setup(t, s)
	svc := timers.New(s, c, timers.Options{Poll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	start := time.Now()
	if _, err := svc.Start(ctx, timers.Timer{ID: "soon", Due: start.Add(300 * time.Millisecond), Channel: "t.fired"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the timer to fire", func() bool { return h.count("soon") == 1 })
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("fired after %s, before it was due", el)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// On an in-process broker, which keeps nothing for a channel nobody
// subscribes to, a due timer waits for a subscriber.
func TestTimerWaitsForSubscriber(t *testing.T) {
	ctx := context.Background()
	s := stores[teststores.Memory](t)
	c := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { _ = c.Close() })
	clk := &clock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	svc := timers.New(s, c, timers.Options{Now: clk.Now, Poll: time.Second})
	if _, err := svc.Start(ctx, timers.Timer{ID: "early", Due: clk.Now(), Channel: "t.late"}); err != nil {
		t.Fatal(err)
	}
	n, next, err := svc.Fire(ctx)
	if n != 0 || err != nil || !next.Equal(clk.Now().Add(time.Second)) {
		t.Fatalf("with no subscriber: fired %d, next %v, %v; want 0, a poll later", n, next, err)
	}
	got := make(chan string, 1)
	if err := c.Handle(ctx, "t.late", func(_ context.Context, m *calf.Message) error { got <- m.ID; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if n, _, err := svc.Fire(ctx); n != 1 || err != nil {
		t.Fatalf("once subscribed: fired %d, %v", n, err)
	}
	if id := <-got; id != "early" {
		t.Errorf("event %q", id)
	}
}
