package postgres

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/calf-go/calf/store/internal/coalesce"
)

// maxBatch bounds the operations sent together in one round trip.
const maxBatch = 64

// batchTimeout bounds a batch of several operations, which no single
// operation's context may cancel.
const batchTimeout = time.Minute

// An op is a Get, a Put or a Delete waiting for, or in, a round trip.
type op struct {
	kind, id []byte
	put      bool
	del      bool
	data     []byte    // put: the data to write
	version  int64     // put: the expected version (0: create); del: the version to remove (0: any)
	now      time.Time // put: the updated_at to record
}

// opResult is what an op's statement returned.
type opResult struct {
	version   int64     // get: the record's
	data      []byte    // get
	updatedAt time.Time // get
	affected  int64     // put, del: rows written or removed (put: 0 is a conflict)
	err       error     // pgx.ErrNoRows for a missing record
}

// coalescer sends the Gets, Puts and Deletes that wait for a connection
// together:
// when every connection the Store may open for them is busy, the
// operations that arrive meanwhile go out in one round trip on the next
// free connection, in one transaction, so that their writes reach the
// disk with a single flush. An operation that finds a connection free goes
// out alone, as a statement of its own, cancelled with its context; a
// batch of several runs to its end (or batchTimeout) whatever their
// contexts, and a caller that stops waiting learns no more of its write
// than of any write whose commit was under way. Two batches lock the rows
// they write in the order of their records, so that they never wait for
// each other in a cycle.
type coalescer = coalesce.Coalescer[op, opResult]

func newCoalescer(s *Store, limit int) *coalescer {
	var c *coalescer
	c = coalesce.New(limit, maxBatch, coalesce.Funcs[op, opResult]{
		Single: s.single,
		Batch:  func(batch []*coalesce.Op[op, opResult]) { s.send(c, batch) },
		Fail:   func(err error) opResult { return opResult{err: err} },
		Compare: func(a, b op) int {
			if n := bytes.Compare(a.kind, b.kind); n != 0 {
				return n
			}
			return bytes.Compare(a.id, b.id)
		},
	})
	return c
}

// single runs o alone, as a statement of its own under its own context,
// retried on a new connection as Store.retry allows.
func (s *Store) single(o *coalesce.Op[op, opResult]) opResult {
	var r opResult
	r.err = s.retry(o.Ctx, opName(&o.In), !o.In.put, func(conn *pgx.Conn) error {
		return s.statement(o.Ctx, conn, &o.In, &r)
	})
	return r
}

// send runs batch in one round trip and one transaction. If the batch
// fails, nothing of it was written: when the connection broke, each
// operation goes on alone where Store.retry would retry it, and reports
// the error where it would not; any other failure (an operation's
// statement failed, which aborts the transaction) runs each operation
// again alone, so that each gets its own outcome.
func (s *Store) send(c *coalescer, batch []*coalesce.Op[op, opResult]) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	results := make([]opResult, len(batch))
	lost, err := s.pool.with(ctx, func(conn *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, bo := range batch {
			o := &bo.In
			if o.del {
				if o.version == 0 {
					b.Queue(s.remove, o.kind, o.id)
				} else {
					b.Queue(s.removeVersion, o.kind, o.id, o.version)
				}
			} else if o.put {
				if o.version == 0 {
					b.Queue(s.insert, o.kind, o.id, o.data, o.now)
				} else {
					b.Queue(s.update, o.kind, o.id, o.data, o.now, o.version)
				}
			} else {
				b.Queue(s.get, o.kind, o.id)
			}
		}
		br := conn.SendBatch(ctx, b)
		var first error
		for i, bo := range batch {
			r := &results[i]
			if bo.In.put || bo.In.del {
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
			o.Finish(results[i])
		}
		return
	}
	if lost {
		s.pool.dropIdle()
	}
	var wg sync.WaitGroup
	for _, o := range batch {
		switch {
		case lost && o.In.put && !safeToRetry(err):
			o.Finish(opResult{err: err}) // the commit may have happened
		case o.Ctx.Err() != nil:
			o.Finish(opResult{err: o.Ctx.Err()})
		default:
			// Alone and at once, so that one waiting for a lock holds up
			// none of the others.
			wg.Go(func() { c.Single(o) })
		}
	}
	wg.Wait()
}

// statement runs o's statement on conn, filling r.
func (s *Store) statement(ctx context.Context, conn *pgx.Conn, o *op, r *opResult) error {
	if o.del {
		var tag pgconn.CommandTag
		var err error
		if o.version == 0 {
			tag, err = conn.Exec(ctx, s.remove, o.kind, o.id)
		} else {
			tag, err = conn.Exec(ctx, s.removeVersion, o.kind, o.id, o.version)
		}
		r.affected = tag.RowsAffected()
		return err
	}
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
	if o.del {
		return "delete"
	}
	if o.put {
		return "put"
	}
	return "get"
}

// coalescerLimit returns how many connections of a pool of maxConns send
// Gets, Puts and Deletes at once: a quarter, at least one. Few senders make large
// batches under load, and so few commits; the rest of the pool serves
// deletes, lists, and the operations of a failed batch retried alone.
func coalescerLimit(maxConns int) int { return max(1, maxConns/4) }
