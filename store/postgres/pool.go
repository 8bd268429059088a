package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pingAfter is how long a connection may sit idle before the pool checks
// it with a round trip before handing it out.
const pingAfter = time.Second

// errPoolClosed is returned by acquire after close.
var errPoolClosed = errors.New("postgres: connection pool closed")

// connPool is a small pool of connections: at most max are open, idle
// ones are reused most recent first, and a connection that the server or
// a cancelled context closed is dropped and replaced by a new one.
type connPool struct {
	cfg   *pgx.ConnConfig
	slots chan struct{} // one token per connection in use or being opened

	mu     sync.Mutex
	idle   []idleConn
	closed bool
}

type idleConn struct {
	conn  *pgx.Conn
	since time.Time
}

func newConnPool(cfg *pgx.ConnConfig, maxConns int) *connPool {
	return &connPool{cfg: cfg, slots: make(chan struct{}, maxConns)}
}

// acquire returns a live connection; the caller must release it.
func (p *connPool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, errPoolClosed
		}
		var ic idleConn
		if n := len(p.idle); n > 0 {
			ic = p.idle[n-1]
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
		if ic.conn == nil {
			break
		}
		if !ic.conn.IsClosed() && (time.Since(ic.since) < pingAfter || ic.conn.Ping(ctx) == nil) {
			return ic.conn, nil
		}
		closeConn(ic.conn)
		if err := ctx.Err(); err != nil {
			<-p.slots
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return conn, nil
}

// release returns conn to the pool, or closes it if it is not fit for
// reuse.
func (p *connPool) release(conn *pgx.Conn) {
	defer func() { <-p.slots }()
	if conn.IsClosed() || conn.PgConn().IsBusy() || conn.PgConn().TxStatus() != 'I' {
		closeConn(conn)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		closeConn(conn)
		return
	}
	p.idle = append(p.idle, idleConn{conn: conn, since: time.Now()})
	p.mu.Unlock()
}

// dropIdle closes every idle connection: after the server closed one, the
// others were most likely closed with it.
func (p *connPool) dropIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ic := range idle {
		closeConn(ic.conn)
	}
}

// close closes the idle connections and makes later acquires fail;
// connections in use are closed when they are released.
func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.dropIdle()
}

// with runs fn on a connection. lost reports whether the connection broke
// during fn.
func (p *connPool) with(ctx context.Context, fn func(*pgx.Conn) error) (lost bool, err error) {
	conn, err := p.acquire(ctx)
	if err != nil {
		return false, err
	}
	err = fn(conn)
	lost = err != nil && conn.IsClosed()
	p.release(conn)
	return lost, err
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx) // the connection is gone either way
}

// safeToRetry reports whether err shows that the statement never reached
// the server.
func safeToRetry(err error) bool { return pgconn.SafeToRetry(err) }
