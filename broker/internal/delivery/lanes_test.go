package delivery

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
)

func TestQueue(t *testing.T) {
	var q Queue[int]
	next := 0
	for i := range 1000 {
		q.Push(i)
		if i%3 == 0 {
			if got := q.Front(); got != next {
				t.Fatalf("front %d, want %d", got, next)
			}
			q.Pop()
			next++
		}
	}
	if q.Len() != 1000-next {
		t.Fatalf("len %d, want %d", q.Len(), 1000-next)
	}
	for ; !q.Empty(); next++ {
		if got := q.Front(); got != next {
			t.Fatalf("front %d, want %d", got, next)
		}
		q.Pop()
	}
	if next != 1000 {
		t.Fatalf("popped up to %d, want 1000", next)
	}
}

func TestLanesOrderPerKeyAndParallelKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		got := map[string][]int{}
		slow := make(chan struct{})
		lanes := NewLanes(&mu, nil, func(it [2]int) bool {
			if it[0] == 0 && it[1] == 0 {
				<-slow // key 0's first item holds up key 0 only
			}
			return true
		}, func(it [2]int) {
			k := fmt.Sprint(it[0])
			got[k] = append(got[k], it[1])
		})
		mu.Lock()
		for i := range 50 {
			for k := range 5 {
				lanes.Push(fmt.Sprint(k), [2]int{k, i})
			}
		}
		mu.Unlock()
		// Once every goroutine of the bubble is blocked, key 0's first item
		// waits on slow and nothing else can move: the other keys are done.
		synctest.Wait()
		mu.Lock()
		n := 0
		for k := 1; k < 5; k++ {
			n += len(got[fmt.Sprint(k)])
		}
		mu.Unlock()
		if n != 4*50 {
			t.Fatalf("the other keys handled %d of %d items while key 0 was held up", n, 4*50)
		}
		mu.Lock()
		if len(got["0"]) != 0 || lanes.Running() != 1 {
			t.Fatalf("key 0 handled %d items, %d lanes running; want 0 and 1", len(got["0"]), lanes.Running())
		}
		mu.Unlock()
		close(slow)
		lanes.Wait()
		for k, items := range got {
			for i, v := range items {
				if v != i {
					t.Fatalf("key %s: item %d is %d, out of order", k, i, v)
				}
			}
			if len(items) != 50 {
				t.Fatalf("key %s: %d items, want 50", k, len(items))
			}
		}
	})
}

func TestLanesStopLeavesTheRest(t *testing.T) {
	var mu sync.Mutex
	var handled []int
	lanes := NewLanes(&mu, nil, func(v int) bool { return v < 2 }, func(v int) { handled = append(handled, v) })
	mu.Lock()
	for i := range 5 {
		lanes.Push("k", i)
	}
	mu.Unlock()
	lanes.Wait()
	if fmt.Sprint(handled) != "[0 1]" {
		t.Fatalf("handled %v, want [0 1]: the lane ends at the first item refused", handled)
	}
	// The lane is gone: a new item starts a new one.
	mu.Lock()
	lanes.Push("k", 1)
	mu.Unlock()
	lanes.Wait()
	if fmt.Sprint(handled) != "[0 1 1]" {
		t.Fatalf("handled %v after a new push, want [0 1 1]", handled)
	}
}
