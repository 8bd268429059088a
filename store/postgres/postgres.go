package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

var _ store.Store = (*Store)(nil)

// DefaultApplicationName is the default of [Options.ApplicationName].
const DefaultApplicationName = "calf"

// DefaultMaxConns is the default of [Options.MaxConns]. A quarter of the
// pool sends the Store's reads and writes, which go out batched when
// they come faster than those connections answer, so a few connections
// serve a worker with a thousand runs in flight.
const DefaultMaxConns = 8

// lockTimeout is the lock_timeout of the Store's connections unless the
// URL sets one: a write that waits longer for a row lock, which only
// another session's open transaction holds that long, fails instead of
// holding up the writes batched with it.
const lockTimeout = "5s"

// cancelGrace is how long a cancelled operation waits for the server to
// confirm the cancellation of its statement before dropping the
// connection.
const cancelGrace = time.Second

// Options configure a [Store]. The zero value, like a nil *Options, means
// every default.
type Options struct {
	// Schema is the PostgreSQL schema that holds the Store's tables; Open
	// creates it if it does not exist. Deployments that share a database
	// keep their records apart by using different schemas. The connection
	// URL may name it too, with the parameter schema (?schema=NAME).
	// Default: the first schema of the connection's search_path (usually
	// public), created if none of the search_path exists.
	Schema string
	// MaxConns bounds the connections the Store keeps open; operations
	// beyond it wait for a connection as long as their context allows. A
	// quarter of them (at least one) send Gets, Puts and Deletes, batched
	// under load (see the package documentation). The connection URL may
	// set it too, with pgxpool's parameter pool_max_conns
	// (?pool_max_conns=16).
	// Default: [DefaultMaxConns], or GOMAXPROCS when that is larger. Each
	// process that opens a Store keeps its own pool, so the sum over the
	// processes that share a server must stay below the server's
	// max_connections (100 unless configured).
	MaxConns int
	// ApplicationName is the application_name the Store's connections
	// report to the server, which shows it in pg_stat_activity. Default:
	// the URL's application_name parameter if it has one, else
	// [DefaultApplicationName].
	ApplicationName string
	// Logger receives the schema migrations Open applies, at level Info,
	// and the operations retried on a new connection after the server
	// closed the old one, at level Warn. Default: nothing is logged.
	Logger *slog.Logger
	// Now returns the time a write records as the record's UpdatedAt,
	// which the database keeps to the microsecond. Default time.Now.
	Now func() time.Time
}

// Store is a [store.Store] in a PostgreSQL database. All methods are safe
// for concurrent use.
type Store struct {
	pool *connPool
	ops  *coalescer
	now  func() time.Time
	log  *slog.Logger

	insert, update, remove, removeVersion, versionOf, get string
	list                                                  [2][2]string

	guard     adapter.Guard
	closeOnce sync.Once
}

// Open connects to the database at url, a PostgreSQL connection URL or
// key=value string such as postgres://user@host:5432/dbname, and applies
// any pending schema migrations. Besides libpq's parameters, url may set
// schema, the schema of the Store's tables (postgres://host/db?schema=calf,
// or schema=calf in the key=value form; see [Options.Schema]); it is an
// error if opts names another one. A nil opts means defaults. Close the
// Store when done.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxConns < 0 {
		return nil, fmt.Errorf("postgres: open: Options.MaxConns is %d: it must not be negative", o.MaxConns)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	// pool_max_conns is pgxpool's parameter, not a server setting.
	if v, ok := cfg.RuntimeParams["pool_max_conns"]; ok {
		delete(cfg.RuntimeParams, "pool_max_conns")
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			return nil, fmt.Errorf("postgres: open: the URL's pool_max_conns parameter is %q: it must be a positive number", v)
		case o.MaxConns != 0 && o.MaxConns != n:
			return nil, fmt.Errorf("postgres: open: the URL sets pool_max_conns=%d and Options.MaxConns %d: set one", n, o.MaxConns)
		}
		o.MaxConns = n
	}
	if o.MaxConns == 0 {
		o.MaxConns = max(DefaultMaxConns, runtime.GOMAXPROCS(0))
	}
	// schema is this package's parameter, not a server setting.
	if schema, ok := cfg.RuntimeParams["schema"]; ok {
		delete(cfg.RuntimeParams, "schema")
		switch {
		case schema == "":
			return nil, errors.New("postgres: open: the URL's schema parameter is empty: name a schema, as in ?schema=calf")
		case o.Schema != "" && o.Schema != schema:
			return nil, fmt.Errorf("postgres: open: the URL names schema %q and Options.Schema %q: name one", schema, o.Schema)
		}
		o.Schema = schema
	}
	if _, ok := cfg.RuntimeParams["lock_timeout"]; !ok {
		cfg.RuntimeParams["lock_timeout"] = lockTimeout
	}
	if o.ApplicationName != "" {
		cfg.RuntimeParams["application_name"] = o.ApplicationName
	} else if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = DefaultApplicationName
	}
	// A cancelled operation asks the server to cancel its statement, so
	// that a write that waits on a lock does not land later; the
	// connection is dropped if the server does not answer in time.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	pool, err := newConnPool(cfg, o.MaxConns)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	t := newTables(o.Schema)
	_, err = pool.with(ctx, func(conn *pgx.Conn) error {
		_, err := migrate(ctx, conn, t, o.Now(), o.Logger)
		return err
	})
	if err != nil {
		pool.close()
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return nil, fmt.Errorf("postgres: open: %w", err)
	}

	s := &Store{guard: adapter.Guard{Name: "postgres", Unavailable: unavailable}, pool: pool, now: o.Now, log: o.Logger}
	s.ops = newCoalescer(s, coalescerLimit(o.MaxConns))
	r := t.records
	s.insert = `INSERT INTO ` + r + ` (kind, id, version, data, updated_at) VALUES ($1, $2, 1, $3, $4)
		ON CONFLICT (kind, id) DO NOTHING`
	s.update = `UPDATE ` + r + ` SET version = version + 1, data = $3, updated_at = $4
		WHERE kind = $1 AND id = $2 AND version = $5`
	s.remove = `DELETE FROM ` + r + ` WHERE kind = $1 AND id = $2`
	s.removeVersion = `DELETE FROM ` + r + ` WHERE kind = $1 AND id = $2 AND version = $3`
	s.versionOf = `SELECT version FROM ` + r + ` WHERE kind = $1 AND id = $2`
	s.get = `SELECT version, data, updated_at FROM ` + r + ` WHERE kind = $1 AND id = $2`
	// List: $2 is the lower bound of the ids (inclusive or exclusive), $3
	// the upper bound (exclusive) when the prefix has one, $4 the limit
	// (NULL: none).
	sel := `SELECT id, version, data, updated_at FROM ` + r + ` WHERE kind = $1 AND id `
	s.list[0][0] = sel + `>= $2 ORDER BY id LIMIT $3`
	s.list[0][1] = sel + `>= $2 AND id < $4 ORDER BY id LIMIT $3`
	s.list[1][0] = sel + `> $2 ORDER BY id LIMIT $3`
	s.list[1][1] = sel + `> $2 AND id < $4 ORDER BY id LIMIT $3`
	return s, nil
}

// Get returns the record, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return store.Record{}, err
	}
	r := s.ops.Do(ctx, op{kind: []byte(kind), id: []byte(id)})
	if errors.Is(r.err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	if r.err != nil {
		return store.Record{}, s.guard.Fail(ctx, "get", r.err)
	}
	return store.Record{Kind: kind, ID: id, Version: r.version, Data: r.data, UpdatedAt: r.updatedAt}, nil
}

// Put writes data if the record's stored version is version (0: the record
// must not exist) and returns the new version, or [store.ErrConflict].
func (s *Store) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return 0, err
	}
	if version < 0 {
		return 0, adapter.ConflictError(kind, id, version)
	}
	if data == nil {
		data = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	r := s.ops.Do(ctx, op{kind: []byte(kind), id: []byte(id), put: true, data: data, version: version, now: s.now()})
	if r.err != nil {
		return 0, s.guard.Fail(ctx, "put", r.err)
	}
	if r.affected == 0 {
		return 0, adapter.ConflictError(kind, id, version)
	}
	return version + 1, nil
}

// Delete removes the record if its stored version is version, or whatever
// its version when version is 0. Deleting a missing record is not an error.
func (s *Store) Delete(ctx context.Context, kind, id string, version int64) error {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return err
	}
	k, i := []byte(kind), []byte(id)
	for {
		r := s.ops.Do(ctx, op{kind: k, id: i, del: true, version: version})
		if r.err != nil {
			return s.guard.Fail(ctx, "delete", r.err)
		}
		if version == 0 || r.affected == 1 {
			return nil
		}
		// The record is missing (success) or at another version
		// (conflict). If it is at version again, it was recreated and
		// rewritten between the two statements: try again.
		var stored int64
		err := s.retry(ctx, "delete", true, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, s.versionOf, k, i).Scan(&stored)
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return s.guard.Fail(ctx, "delete", err)
		case stored != version:
			return adapter.ConflictError(kind, id, version)
		}
	}
}

// List returns the records of kind whose id starts with prefix, ordered by
// id byte by byte, at most limit of them (0 or less: no limit), starting
// after the id after.
func (s *Store) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := adapter.CheckKind(kind); err != nil {
		return nil, err
	}
	if err := s.guard.Live(ctx); err != nil {
		return nil, err
	}
	// Every id with the prefix is >= prefix and < the prefix's successor;
	// after, when it is past prefix, is the tighter lower bound.
	lower, strict := prefix, 0
	if after != "" && after >= prefix {
		lower, strict = after, 1
	}
	end, bounded := adapter.PrefixEnd(prefix)
	upper := []byte(end)
	args := []any{[]byte(kind), []byte(lower), nil}
	if limit > 0 {
		args[2] = int64(limit)
	}
	if bounded {
		args = append(args, upper)
	}
	query := s.list[strict][boolIndex(bounded)]
	var out []store.Record
	err := s.retry(ctx, "list", true, func(conn *pgx.Conn) error {
		out = out[:0]
		if limit > 0 && out == nil {
			out = make([]store.Record, 0, min(limit, 64))
		}
		rows, err := conn.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			rec := store.Record{Kind: kind}
			var id []byte
			if err := rows.Scan(&id, &rec.Version, &rec.Data, &rec.UpdatedAt); err != nil {
				return err
			}
			rec.ID = string(id)
			out = append(out, rec)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.guard.Fail(ctx, "list", err)
	}
	return out, nil
}

// Close closes the Store's connections; those that operations in progress
// hold close when the operations end. Later calls of other methods return
// [store.ErrClosed]; Close itself may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.guard.Close()
		s.pool.close()
	})
	return nil
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
