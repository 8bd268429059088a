package delivery

import (
	"strconv"
	"sync"
)

// Queue is a lane's queue: the items of one key, first in first out. Its
// zero value is empty. It is not safe for concurrent use.
type Queue[T any] struct {
	items []T
	head  int
}

// Push appends v.
func (q *Queue[T]) Push(v T) { q.items = append(q.items, v) }

// Empty reports whether q holds nothing.
func (q *Queue[T]) Empty() bool { return q.head == len(q.items) }

// Len returns the number of items in q.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Front returns the first item; q must not be empty.
func (q *Queue[T]) Front() T { return q.items[q.head] }

// Pop removes the first item; q must not be empty. The space of the items
// removed is reused once they are half the queue or it is empty.
func (q *Queue[T]) Pop() {
	var zero T
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 64 && 2*q.head >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}

// Reset empties q, keeping its space unless it grew past max items.
func (q *Queue[T]) Reset(max int) {
	clear(q.items[q.head:])
	items := q.items[:0]
	if cap(items) > max {
		items = nil
	}
	*q = Queue[T]{items: items}
}

// SoloKey returns the lane key of a message ordered with nothing (one
// without a key, or that could not be decoded), from its position n in
// its partition: a lane of its own.
func SoloKey(n uint64) string { return "\x00" + strconv.FormatUint(n, 10) }

// Lanes runs a lane per key over the items of one partition: a lane
// handles the items of its key one at a time, in the order they were
// pushed, and lanes run in parallel, so that a slow item holds up only the
// later items of its key. A lane runs while it has items, in a goroutine
// of its own, and ends when it is empty.
//
// The lanes are guarded by the lock their owner gives [NewLanes], which
// also guards the owner's own state of the items (what it holds, what is
// settled).
type Lanes[T any] struct {
	mu      sync.Locker
	ended   *sync.Cond
	lanes   map[string]*Queue[T]
	running int
	start   func(func())
	handle  func(T) bool
	done    func(T)
}

// NewLanes returns lanes guarded by mu. Each lane is started with start
// (nil: a plain goroutine), and handles each item with handle, called
// without mu held; when handle reports true, the item is removed from its
// lane and done (if not nil) is called with mu held. When handle reports
// false the lane ends at once, and drops the items left in it: the owner
// stops, and leaves them unsettled for the partition's next owner.
func NewLanes[T any](mu sync.Locker, start func(func()), handle func(T) bool, done func(T)) *Lanes[T] {
	if start == nil {
		start = func(f func()) { go f() }
	}
	return &Lanes[T]{mu: mu, ended: sync.NewCond(mu), lanes: map[string]*Queue[T]{}, start: start, handle: handle, done: done}
}

// Push appends v to the lane of key, starting the lane if it is idle. The
// lock must be held.
func (l *Lanes[T]) Push(key string, v T) {
	if q := l.lanes[key]; q != nil {
		q.Push(v)
		return
	}
	q := &Queue[T]{}
	q.Push(v)
	l.lanes[key] = q
	l.running++
	l.start(func() { l.run(key, q) })
}

// Running returns the number of lanes running. The lock must be held.
func (l *Lanes[T]) Running() int { return l.running }

// Wait waits until no lane runs. The lock must not be held.
func (l *Lanes[T]) Wait() {
	l.mu.Lock()
	for l.running > 0 {
		l.ended.Wait()
	}
	l.mu.Unlock()
}

// run handles the items of the lane q of key until it is empty or handle
// reports false.
func (l *Lanes[T]) run(key string, q *Queue[T]) {
	l.mu.Lock()
	defer func() {
		delete(l.lanes, key)
		l.running--
		l.ended.Broadcast()
		l.mu.Unlock()
	}()
	for !q.Empty() {
		v := q.Front()
		l.mu.Unlock()
		ok := l.handle(v)
		l.mu.Lock()
		if !ok {
			return
		}
		q.Pop()
		if l.done != nil {
			l.done(v)
		}
	}
}
