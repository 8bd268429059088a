package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
	"github.com/calf-go/calf/store/internal/coalesce"
)

var _ store.Store = (*Store)(nil)

// DefaultBusyTimeout is the default of [Options.BusyTimeout].
const DefaultBusyTimeout = 5 * time.Second

// Options configure a [Store]. The zero value, like a nil *Options, means
// every default.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// process that has the same file open before it fails. Default
	// [DefaultBusyTimeout]. Writers of one Store never wait on each other
	// through this timeout: they queue for the Store's write connection,
	// as long as their context allows.
	BusyTimeout time.Duration
	// MaxReaders bounds the connections that serve Get and List at the
	// same time. Default: GOMAXPROCS, and at least 2.
	MaxReaders int
	// Logger receives the schema migrations Open applies, at level Info.
	// Default: nothing is logged.
	Logger *slog.Logger
	// Now returns the time a write records as the record's UpdatedAt.
	// Default time.Now.
	Now func() time.Time
	// FullSync has each commit wait for the disk (synchronous=FULL), so
	// that what a Put acknowledged survives a power loss or an operating
	// system crash, not only a crash of the process (the default,
	// synchronous=NORMAL, may lose the last commits then). Each commit
	// costs an fsync, which the Puts committed together share.
	FullSync bool
}

// Store is a [store.Store] in a SQLite database file. All methods are safe
// for concurrent use.
type Store struct {
	writer *sql.DB // one connection: writes queue here
	reader *sql.DB // read-only connections
	now    func() time.Time

	insert, update, remove, removeVersion, versionOf *sql.Stmt // on writer
	get                                              *sql.Stmt // on reader
	list                                             [2][2]*sql.Stmt

	// puts commits the Puts that wait for the write connection together.
	puts *coalesce.Coalescer[put, putResult]

	guard     adapter.Guard
	closeOnce sync.Once
	closeErr  error
}

// DefaultPath returns where a Store lives when the user chose no file:
// calf/calf.db under $XDG_DATA_HOME when that is set to an absolute path,
// otherwise ~/.local/share/calf/calf.db. It creates nothing; [Open] creates
// the directory.
func DefaultPath() (string, error) {
	if dir := os.Getenv("XDG_DATA_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "calf", "calf.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("sqlite: default path: %w", err)
	}
	return filepath.Join(home, ".local", "share", "calf", "calf.db"), nil
}

// Open opens the database file at path, creating it and its directory
// (mode 0700) if they do not exist, and applies any pending schema
// migrations. A nil opts means defaults. Close the Store when done.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.MaxReaders <= 0 {
		o.MaxReaders = max(2, runtime.GOMAXPROCS(0))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	s := &Store{guard: adapter.Guard{Name: "sqlite"}, now: o.Now}
	s.puts = coalesce.New(1, maxBatch, coalesce.Funcs[put, putResult]{
		Single: func(o *coalesce.Op[put, putResult]) putResult { return s.exec(o.Ctx, nil, o.In) },
		Batch:  s.commitBatch,
		Fail:   func(err error) putResult { return putResult{err: err} },
	})
	if err := s.open(abs, o); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) open(path string, o Options) error {
	ctx := context.Background()
	busy := strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)

	var err error
	synchronous := "NORMAL"
	if o.FullSync {
		synchronous = "FULL"
	}
	s.writer, err = sql.Open("sqlite", dsn(path, url.Values{
		"_busy_timeout": {busy},
		"_journal_mode": {"WAL"},
		"_synchronous":  {synchronous},
		"_txlock":       {"immediate"},
	}))
	if err != nil {
		return err
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)
	// The first connection sets the WAL journal mode, which another
	// process (or Store) opening the same new file at that moment can
	// refuse at once with SQLITE_BUSY, without waiting for the busy
	// timeout: the open is tried again until the busy timeout has passed.
	for deadline := time.Now().Add(o.BusyTimeout); ; {
		_, err := migrate(ctx, s.writer, o.Now().UnixNano(), o.Logger)
		if err == nil {
			break
		}
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}

	s.reader, err = sql.Open("sqlite", dsn(path, url.Values{
		"_busy_timeout": {busy},
		"_query_only":   {"1"},
	}))
	if err != nil {
		return err
	}
	s.reader.SetMaxOpenConns(o.MaxReaders)
	s.reader.SetMaxIdleConns(o.MaxReaders)
	s.reader.SetConnMaxLifetime(0)
	s.reader.SetConnMaxIdleTime(0)

	prepare := func(db *sql.DB, query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, query)
		return st
	}
	s.insert = prepare(s.writer, `INSERT INTO records (kind, id, version, data, updated_at) VALUES (?1, ?2, 1, ?3, ?4)
		ON CONFLICT (kind, id) DO NOTHING`)
	s.update = prepare(s.writer, `UPDATE records SET version = version + 1, data = ?3, updated_at = ?4
		WHERE kind = ?1 AND id = ?2 AND version = ?5`)
	s.remove = prepare(s.writer, `DELETE FROM records WHERE kind = ?1 AND id = ?2`)
	s.removeVersion = prepare(s.writer, `DELETE FROM records WHERE kind = ?1 AND id = ?2 AND version = ?3`)
	s.versionOf = prepare(s.writer, `SELECT version FROM records WHERE kind = ?1 AND id = ?2`)
	s.get = prepare(s.reader, `SELECT version, data, updated_at FROM records WHERE kind = ?1 AND id = ?2`)
	// List: ?2 is the lower bound of the ids (inclusive or exclusive), ?3
	// the upper bound (exclusive) when the prefix has one, ?4 the limit.
	const sel = `SELECT id, version, data, updated_at FROM records WHERE kind = ?1 AND id `
	s.list[0][0] = prepare(s.reader, sel+`>= ?2 ORDER BY id LIMIT ?4`)
	s.list[0][1] = prepare(s.reader, sel+`>= ?2 AND id < ?3 ORDER BY id LIMIT ?4`)
	s.list[1][0] = prepare(s.reader, sel+`> ?2 ORDER BY id LIMIT ?4`)
	s.list[1][1] = prepare(s.reader, sel+`> ?2 AND id < ?3 ORDER BY id LIMIT ?4`)
	return err
}

// dsn makes the connection string for the file at the absolute path: a
// file: URI, so that any character in the path is taken literally.
func dsn(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: params.Encode()}
	return u.String()
}

// Get returns the record, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return store.Record{}, err
	}
	rec := store.Record{Kind: kind, ID: id}
	var updated int64
	err := s.get.QueryRowContext(ctx, kind, id).Scan(&rec.Version, &rec.Data, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	if err != nil {
		return store.Record{}, s.guard.Fail(ctx, "get", err)
	}
	rec.UpdatedAt = time.Unix(0, updated)
	return rec, nil
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
	r := s.puts.Do(ctx, put{kind: kind, id: id, data: data, version: version, now: s.now().UnixNano()})
	if r.err != nil {
		return 0, s.guard.Fail(ctx, "put", r.err)
	}
	if r.affected == 0 {
		return 0, adapter.ConflictError(kind, id, version)
	}
	return version + 1, nil
}

// maxBatch bounds the Puts committed together.
const maxBatch = 128

// put is a Put for the write connection.
type put struct {
	kind, id string
	data     []byte
	version  int64
	now      int64
}

// putResult is what a put's statement returned.
type putResult struct {
	affected int64 // 0: a conflict
	err      error
}

// exec runs p's statement, in tx when it is not nil.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, p put) putResult {
	st := s.update
	args := []any{p.kind, p.id, p.data, p.now, p.version}
	if p.version == 0 {
		st, args = s.insert, args[:4]
	}
	if tx != nil {
		st = tx.StmtContext(ctx, st)
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return putResult{err: err}
	}
	n, err := res.RowsAffected()
	return putResult{affected: n, err: err}
}

// commitBatch writes the Puts of batch in one transaction, so that they
// reach the file with a single commit; each gets its own outcome (a
// conflict writes nothing of its Put and leaves the others be). If the
// transaction fails, nothing of it was written, and each Put runs again
// alone.
func (s *Store) commitBatch(batch []*coalesce.Op[put, putResult]) {
	ctx := context.Background() // a batch runs to its end whatever its callers' contexts
	results := make([]putResult, len(batch))
	err := func() error {
		tx, err := s.writer.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		for i, o := range batch {
			if results[i] = s.exec(ctx, tx, o.In); results[i].err != nil {
				return results[i].err
			}
		}
		return tx.Commit()
	}()
	for i, o := range batch {
		switch {
		case err == nil:
			o.Finish(results[i])
		case o.Ctx.Err() != nil:
			o.Finish(putResult{err: o.Ctx.Err()})
		default:
			o.Finish(s.exec(o.Ctx, nil, o.In))
		}
	}
}

// Delete removes the record if its stored version is version, or whatever
// its version when version is 0. Deleting a missing record is not an error.
func (s *Store) Delete(ctx context.Context, kind, id string, version int64) error {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return err
	}
	if version == 0 {
		if _, err := s.remove.ExecContext(ctx, kind, id); err != nil {
			return s.guard.Fail(ctx, "delete", err)
		}
		return nil
	}
	res, err := s.removeVersion.ExecContext(ctx, kind, id, version)
	if err != nil {
		return s.guard.Fail(ctx, "delete", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.guard.Fail(ctx, "delete", err)
	} else if n == 1 {
		return nil
	}
	// The record is missing (success) or at another version (conflict).
	// Decide on one snapshot, since another process may have written
	// since the DELETE.
	if err := s.deleteSlow(ctx, kind, id, version); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return s.guard.Fail(ctx, "delete", err)
	}
	return nil
}

func (s *Store) deleteSlow(ctx context.Context, kind, id string, version int64) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var stored int64
	err = tx.StmtContext(ctx, s.versionOf).QueryRowContext(ctx, kind, id).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case stored != version:
		return adapter.ConflictError(kind, id, version)
	}
	if _, err := tx.StmtContext(ctx, s.removeVersion).ExecContext(ctx, kind, id, version); err != nil {
		return err
	}
	return tx.Commit()
}

// List returns the records of kind whose id starts with prefix, ordered by
// id, at most limit of them (0 or less: no limit), starting after the id
// after.
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
	upper, bounded := adapter.PrefixEnd(prefix)
	args := []any{kind, lower, nil, -1}
	if bounded {
		args[2] = upper
	}
	if limit > 0 {
		args[3] = limit
	}
	st := s.list[strict][boolIndex(bounded)]
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, s.guard.Fail(ctx, "list", err)
	}
	defer rows.Close()
	var out []store.Record
	if limit > 0 {
		out = make([]store.Record, 0, min(limit, 64))
	}
	for rows.Next() {
		rec := store.Record{Kind: kind}
		var updated int64
		if err := rows.Scan(&rec.ID, &rec.Version, &rec.Data, &updated); err != nil {
			return nil, s.guard.Fail(ctx, "list", err)
		}
		rec.UpdatedAt = time.Unix(0, updated)
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.guard.Fail(ctx, "list", err)
	}
	return out, nil
}

// Close closes the database. Later calls of other methods return
// [store.ErrClosed]; Close itself may be called more than once and returns
// the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.guard.Close()
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

// closeDBs closes the readers first, so that the writer is the last
// connection and checkpoints the WAL into the database file.
func (s *Store) closeDBs() error {
	var errs []error
	for _, db := range []*sql.DB{s.reader, s.writer} {
		if db != nil {
			if err := db.Close(); err != nil {
				errs = append(errs, fmt.Errorf("sqlite: close: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (the database is
// locked by another connection).
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}
