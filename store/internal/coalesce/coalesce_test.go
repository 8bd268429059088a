package coalesce

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// fake runs operations (ints) whose result is the input doubled, and
// records how they ran.
type fake struct {
	mu      sync.Mutex
	singles []int
	batches [][]int
	block   chan struct{} // Single of 0 waits for it
	started chan struct{} // closed when Single of 0 starts
}

func newFake() (*fake, *Coalescer[int, int]) {
	f := &fake{block: make(chan struct{}), started: make(chan struct{})}
	c := New(1, 3, Funcs[int, int]{
		Single: func(o *Op[int, int]) int {
			if o.In == 0 {
				close(f.started)
				<-f.block
			}
			f.mu.Lock()
			f.singles = append(f.singles, o.In)
			f.mu.Unlock()
			return 2 * o.In
		},
		Batch: func(ops []*Op[int, int]) {
			var ins []int
			for _, o := range ops {
				ins = append(ins, o.In)
			}
			f.mu.Lock()
			f.batches = append(f.batches, ins)
			f.mu.Unlock()
			for _, o := range ops {
				o.Finish(2 * o.In)
			}
		},
		Fail:    func(error) int { return -1 },
		Compare: cmp.Compare[int],
	})
	return f, c
}

// waitQueued waits until every goroutine of the test's bubble is blocked,
// then checks that n operations are queued in c.
func waitQueued(t *testing.T, c *Coalescer[int, int], n int) {
	t.Helper()
	synctest.Wait()
	c.mu.Lock()
	queued := len(c.queue)
	c.mu.Unlock()
	if queued != n {
		t.Fatalf("%d operations queued, want %d", queued, n)
	}
}

// An operation that finds the sender free runs alone; those that arrive
// while it runs go out in batches of at most the maximum, in order.
func TestBatchesWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := newFake()
		if r := c.Do(t.Context(), 7); r != 14 {
			t.Fatalf("Do(7) = %d", r)
		}
		var wg sync.WaitGroup
		wg.Go(func() { c.Do(t.Context(), 0) })
		<-f.started
		results := make([]int, 6)
		for i := range 5 {
			wg.Go(func() { results[5-i] = c.Do(t.Context(), 5-i) })
		}
		waitQueued(t, c, 5)
		close(f.block)
		wg.Wait()
		for i := 1; i <= 5; i++ {
			if results[i] != 2*i {
				t.Errorf("Do(%d) = %d", i, results[i])
			}
		}
		if !slices.Equal(f.singles, []int{7, 0}) {
			t.Errorf("run alone: %v, want 7 then 0", f.singles)
		}
		var sizes []int
		for _, b := range f.batches {
			if !slices.IsSorted(b) {
				t.Errorf("batch %v is not in order", b)
			}
			sizes = append(sizes, len(b))
		}
		if len(f.batches) == 0 || slices.Max(sizes) > 3 {
			t.Errorf("batches %v: want batches of at most 3", f.batches)
		}
		if b, n := c.Stats(); b != int64(len(f.batches)) || n != 5-int64(len(f.singles)-2) {
			t.Errorf("stats: %d batches of %d operations; ran %v alone and %v together", b, n, f.singles, f.batches)
		}
	})
}

// An operation whose context ends while it is queued is not run.
func TestCancelledWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := newFake()
		var wg sync.WaitGroup
		wg.Go(func() { c.Do(t.Context(), 0) })
		<-f.started
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int)
		go func() { done <- c.Do(ctx, 9) }()
		waitQueued(t, c, 1)
		cancel()
		if r := <-done; r != -1 {
			t.Errorf("Do with an ended context = %d, want the failure", r)
		}
		close(f.block)
		wg.Wait()
		if slices.Contains(f.singles, 9) || len(f.batches) > 0 {
			t.Errorf("the cancelled operation ran: alone %v, batches %v", f.singles, f.batches)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if errors.Is(ctx.Err(), context.Canceled) && c.running != 0 {
			t.Errorf("%d senders left running", c.running)
		}
	})
}
