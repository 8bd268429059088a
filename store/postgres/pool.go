package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pingAfter is how long a connection may sit idle before the pool checks
// it with a round trip before handing it out.
const pingAfter = time.Second

// connPool is the Store's pgxpool with the two things the Store adds: it
// reports whether the connection an operation ran on broke under it, and it
// drops the other connections when one broke, since they most likely broke
// with it (the server restarted).
type connPool struct {
	pool *pgxpool.Pool
}

// newConnPool returns a pool of at most maxConns connections configured
// by cfg. It connects lazily: the first operation opens the first
// connection.
func newConnPool(cfg *pgx.ConnConfig, maxConns int) (*connPool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = cfg
	pc.MaxConns = int32(min(maxConns, 1<<30))
	pc.MinConns = 0
	// Check a connection that sat idle before handing it out, so that an
	// operation does not fail on a connection the server closed meanwhile.
	pc.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > pingAfter }
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, err
	}
	return &connPool{pool: pool}, nil
}

// dropIdle closes every idle connection, and those in use when they are
// released: after the server closed one, the others were most likely
// closed with it.
func (p *connPool) dropIdle() { p.pool.Reset() }

// close closes the pool: later acquires fail, idle connections close now
// and those in use when they are released.
func (p *connPool) close() {
	// pgxpool's Close waits for the connections in use; the Store's Close
	// does not, so the wait happens in the background.
	go p.pool.Close()
}

// with runs fn on a connection. lost reports whether the connection broke
// during fn.
func (p *connPool) with(ctx context.Context, fn func(*pgx.Conn) error) (lost bool, err error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// Release closes a connection that is not fit for reuse (closed, busy,
	// or inside a transaction) instead of keeping it.
	defer c.Release()
	conn := c.Conn()
	err = fn(conn)
	return err != nil && conn.IsClosed(), err
}
