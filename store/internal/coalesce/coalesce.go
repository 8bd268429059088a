package coalesce

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Op is one operation of input T and result R, waiting or under way.
type Op[T, R any] struct {
	// Ctx is the context of the caller that asked for the operation.
	Ctx context.Context
	// In says what to do.
	In T

	done  chan R
	alone atomic.Bool
}

// Finish hands the operation its result. Each operation of a batch must
// be finished exactly once.
func (o *Op[T, R]) Finish(r R) { o.done <- r }

// Alone reports whether the operation was sent alone, under its own
// context.
func (o *Op[T, R]) Alone() bool { return o.alone.Load() }

// Funcs say how to run operations.
type Funcs[T, R any] struct {
	// Single runs one operation alone, under its context, and returns
	// its result.
	Single func(o *Op[T, R]) R
	// Batch runs several operations together, under no caller's context
	// (a batch runs to its end whatever their contexts), and finishes
	// each (Op.Finish), possibly by running some alone (Coalescer.Single).
	Batch func(ops []*Op[T, R])
	// Fail is the result of an operation that ends with err before it
	// runs: its context ended.
	Fail func(err error) R
	// Compare, when set, orders the operations of a batch (stably):
	// adapters order them by record, so that two batches take the locks
	// of their records in the same order.
	Compare func(a, b T) int
}

// Coalescer queues operations and runs them, alone when a sender is free
// and in batches while none is.
type Coalescer[T, R any] struct {
	f        Funcs[T, R]
	limit    int
	maxBatch int

	mu      sync.Mutex
	queue   []*Op[T, R]
	running int // goroutines sending operations, at most limit

	batches, batched atomic.Int64 // batches of several sent, and their operations
}

// New returns a Coalescer that runs operations on up to limit senders at
// once, at most maxBatch operations to a batch.
func New[T, R any](limit, maxBatch int, f Funcs[T, R]) *Coalescer[T, R] {
	return &Coalescer[T, R]{f: f, limit: max(limit, 1), maxBatch: max(maxBatch, 1)}
}

// Stats returns how many batches of several operations were sent, and how
// many operations they held.
func (c *Coalescer[T, R]) Stats() (batches, ops int64) {
	return c.batches.Load(), c.batched.Load()
}

// Do runs the operation in (for a caller whose context is ctx) and waits
// for its result, or for ctx to end. An operation still queued when ctx
// ends is not run; one under way alone is waited for (its statement is
// being cancelled with ctx), so that it does not land after Do returned;
// one under way in a batch may still be written after Do returned ctx's
// error, as any write whose commit was under way.
func (c *Coalescer[T, R]) Do(ctx context.Context, in T) R {
	o := &Op[T, R]{Ctx: ctx, In: in}
	c.mu.Lock()
	if c.running < c.limit && len(c.queue) == 0 {
		// A sender is free and nothing waits: run it here, without
		// handing it to another goroutine, then leave what arrived
		// meanwhile to a sender.
		c.running++
		c.mu.Unlock()
		o.alone.Store(true)
		r := c.f.Single(o)
		c.mu.Lock()
		more := len(c.queue) > 0
		if !more {
			c.running--
		}
		c.mu.Unlock()
		if more {
			go c.run()
		}
		return r
	}
	o.done = make(chan R, 1)
	c.queue = append(c.queue, o)
	start := c.running < c.limit
	if start {
		c.running++
	}
	c.mu.Unlock()
	if start {
		go c.run()
	}
	select {
	case r := <-o.done:
		return r
	case <-ctx.Done():
		c.mu.Lock()
		if i := slices.Index(c.queue, o); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
			c.mu.Unlock()
			return c.f.Fail(ctx.Err())
		}
		c.mu.Unlock()
		if o.alone.Load() {
			return <-o.done
		}
		return c.f.Fail(ctx.Err()) // the channel's buffer takes the batch's outcome
	}
}

// Single runs o alone and finishes it: for a Batch function that runs
// some of its operations alone.
func (c *Coalescer[T, R]) Single(o *Op[T, R]) {
	o.alone.Store(true)
	o.Finish(c.f.Single(o))
}

// run sends the queued operations, a batch at a time, until none is left.
func (c *Coalescer[T, R]) run() {
	for {
		c.mu.Lock()
		batch := c.take()
		if len(batch) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		if len(batch) == 1 {
			batch[0].alone.Store(true)
		}
		c.mu.Unlock()
		if len(batch) == 1 {
			c.Single(batch[0])
		} else {
			c.batches.Add(1)
			c.batched.Add(int64(len(batch)))
			c.f.Batch(batch)
		}
	}
}

// take removes up to maxBatch operations from the queue and returns them,
// ordered by Compare. Operations whose context ended are finished with
// Fail. c.mu is held.
func (c *Coalescer[T, R]) take() []*Op[T, R] {
	var batch []*Op[T, R]
	rest := c.queue[:0]
	for _, o := range c.queue {
		switch {
		case o.Ctx.Err() != nil:
			o.Finish(c.f.Fail(o.Ctx.Err()))
		case len(batch) == c.maxBatch:
			rest = append(rest, o)
		default:
			batch = append(batch, o)
		}
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	if c.f.Compare != nil {
		slices.SortStableFunc(batch, func(a, b *Op[T, R]) int { return c.f.Compare(a.In, b.In) })
	}
	return batch
}
