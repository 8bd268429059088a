package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxBatch bounds the operations sent together in one round trip.
const maxBatch = 64

// batchTimeout bounds a batch of several operations, which no single
// operation's context may cancel.
const batchTimeout = time.Minute

// An op is a Get or a Put waiting for, or in, a round trip.
type op struct {
	ctx      context.Context
	kind, id []byte
	put      bool
	data     []byte    // put: the data to write
	version  int64     // put: the expected version (0: create)
	now      time.Time // put: the updated_at to record
	done     chan opResult
	alone    atomic.Bool // sent alone, under ctx
}

// opResult is what an op's statement returned.
type opResult struct {
	version   int64     // get: the record's
	data      []byte    // get
	updatedAt time.Time // get
	affected  int64     // put: rows written (0: conflict)
	err       error     // pgx.ErrNoRows for a missing record
}

// coalescer sends the Gets and Puts that wait for a connection together:
// when every connection the Store may open is busy, the operations that
// arrive meanwhile go out in one round trip on the next free connection,
// in one transaction, so that their writes reach the disk with a single
// flush. An operation that finds a connection free goes out alone, as a
// statement of its own, cancelled with its context; a batch of several
// runs to its end (or batchTimeout) whatever their contexts, and a caller
// that stops waiting learns no more of its write than of any write
// whose commit was under way.
type coalescer struct {
	s *Store

	mu      sync.Mutex
	queue   []*op
	running int // goroutines sending operations, at most limit
	limit   int

	batches, batched atomic.Int64 // batches of several sent, and their operations
}

func newCoalescer(s *Store, limit int) *coalescer {
	return &coalescer{s: s, limit: limit}
}

// do sends o and waits for its result, or for o.ctx to end.
func (c *coalescer) do(o *op) opResult {
	o.done = make(chan opResult, 1)
	c.mu.Lock()
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
	case <-o.ctx.Done():
		c.mu.Lock()
		if i := slices.Index(c.queue, o); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
			c.mu.Unlock()
			return opResult{err: o.ctx.Err()}
		}
		c.mu.Unlock()
		if o.alone.Load() {
			// Its statement is being cancelled: wait for the server to
			// confirm, so that a write does not land after Put returned.
			return <-o.done
		}
		// Under way in a batch, whose outcome the channel's buffer takes.
		return opResult{err: o.ctx.Err()}
	}
}

// run sends the queued operations, a batch at a time, until none is left.
func (c *coalescer) run() {
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
			c.single(batch[0])
		} else {
			c.send(batch)
		}
	}
}

// take removes up to maxBatch operations from the queue and returns them
// in the order of their records (those of one record in the order they
// came), so that two batches lock the rows they write in the same order
// and never wait for each other in a cycle. c.mu is held.
func (c *coalescer) take() []*op {
	var batch []*op
	rest := c.queue[:0]
	for _, o := range c.queue {
		switch {
		case o.ctx.Err() != nil:
			o.done <- opResult{err: o.ctx.Err()}
		case len(batch) == maxBatch:
			rest = append(rest, o)
		default:
			batch = append(batch, o)
		}
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	slices.SortStableFunc(batch, func(a, b *op) int {
		if n := bytes.Compare(a.kind, b.kind); n != 0 {
			return n
		}
		return bytes.Compare(a.id, b.id)
	})
	return batch
}

// single runs o alone, as a statement of its own under its own context,
// retried on a new connection as Store.retry allows.
func (c *coalescer) single(o *op) {
	o.alone.Store(true)
	var r opResult
	r.err = c.s.retry(o.ctx, opName(o), !o.put, func(conn *pgx.Conn) error {
		return c.s.statement(o.ctx, conn, o, &r)
	})
	o.done <- r
}

// send runs batch in one round trip and one transaction. If the batch
// fails, nothing of it was written: when the connection broke, each
// operation goes on alone where Store.retry would retry it, and reports
// the error where it would not; any other failure (an operation's
// statement failed, which aborts the transaction) runs each operation
// again alone, so that each gets its own outcome.
func (c *coalescer) send(batch []*op) {
	c.batches.Add(1)
	c.batched.Add(int64(len(batch)))
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	results := make([]opResult, len(batch))
	lost, err := c.s.pool.with(ctx, func(conn *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, o := range batch {
			if o.put {
				if o.version == 0 {
					b.Queue(c.s.insert, o.kind, o.id, o.data, o.now)
				} else {
					b.Queue(c.s.update, o.kind, o.id, o.data, o.now, o.version)
				}
			} else {
				b.Queue(c.s.get, o.kind, o.id)
			}
		}
		br := conn.SendBatch(ctx, b)
		var first error
		for i, o := range batch {
			r := &results[i]
			if o.put {
				var tag pgconn.CommandTag
				tag, r.err = br.Exec()
				r.affected = tag.RowsAffected()
			} else {
				r.err = br.QueryRow().Scan(&r.version, &r.data, &r.updatedAt)
			}
			if r.err != nil && !errors.Is(r.err, pgx.ErrNoRows) && first == nil {
				first = r.err
			}
		}
		// Close ends the implicit transaction: only then are the writes
		// committed.
		if err := br.Close(); first == nil {
			first = err
		}
		return first
	})
	if err == nil {
		for i, o := range batch {
			o.done <- results[i]
		}
		return
	}
	if lost {
		c.s.pool.dropIdle()
	}
	var wg sync.WaitGroup
	for _, o := range batch {
		switch {
		case lost && o.put && !safeToRetry(err):
			o.done <- opResult{err: err} // the commit may have happened
		case o.ctx.Err() != nil:
			o.done <- opResult{err: o.ctx.Err()}
		default:
			// Alone and at once, so that one waiting for a lock holds up
			// none of the others.
			wg.Go(func() { c.single(o) })
		}
	}
	wg.Wait()
}

// statement runs o's statement on conn, filling r.
func (s *Store) statement(ctx context.Context, conn *pgx.Conn, o *op, r *opResult) error {
	if !o.put {
		return conn.QueryRow(ctx, s.get, o.kind, o.id).Scan(&r.version, &r.data, &r.updatedAt)
	}
	var tag pgconn.CommandTag
	var err error
	if o.version == 0 {
		tag, err = conn.Exec(ctx, s.insert, o.kind, o.id, o.data, o.now)
	} else {
		tag, err = conn.Exec(ctx, s.update, o.kind, o.id, o.data, o.now, o.version)
	}
	r.affected = tag.RowsAffected()
	return err
}

func opName(o *op) string {
	if o.put {
		return "put"
	}
	return "get"
}

// coalescerLimit returns how many connections of a pool of maxConns send
// Gets and Puts at once: a quarter, at least one. Few senders make large
// batches under load, and so few commits; the rest of the pool serves
// deletes, lists, and the operations of a failed batch retried alone.
func coalescerLimit(maxConns int) int { return max(1, maxConns/4) }
