package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrSchemaVersion is returned by [Open] when the database was written by a
// newer version of this package, with migrations this one does not know.
var ErrSchemaVersion = errors.New("postgres: database schema is newer than this program")

// tables are the schema-qualified, quoted names of the tables of a Store.
type tables struct {
	schema     string // quoted schema name; empty for the search path
	records    string
	migrations string
	lockKey    int64 // the advisory lock that serializes migrations
}

func newTables(schema string) tables {
	t := tables{
		records:    pgx.Identifier{"calf_records"}.Sanitize(),
		migrations: pgx.Identifier{"calf_schema_migrations"}.Sanitize(),
	}
	if schema != "" {
		t.schema = pgx.Identifier{schema}.Sanitize()
		t.records = pgx.Identifier{schema, "calf_records"}.Sanitize()
		t.migrations = pgx.Identifier{schema, "calf_schema_migrations"}.Sanitize()
	}
	h := fnv.New64a()
	h.Write([]byte("calf store/postgres migrations " + t.migrations))
	t.lockKey = int64(h.Sum64())
	return t
}

// migrations are the schema changes in order: migrations[i] brings the
// schema to version i+1. Each is a function of the table names. Append
// only; never edit one that has shipped.
var migrations = []func(tables) string{
	func(t tables) string {
		return `CREATE TABLE ` + t.records + ` (
			kind       BYTEA       NOT NULL,
			id         BYTEA       NOT NULL,
			version    BIGINT      NOT NULL,
			data       BYTEA       NOT NULL,
			updated_at TIMESTAMPTZ NOT NULL,
			PRIMARY KEY (kind, id)
		)`
	},
}

// migrate applies the migrations the database lacks, all in one
// transaction that holds a transaction-scoped advisory lock, so that
// processes opening one database at once migrate in turn. It returns the
// schema version.
func migrate(ctx context.Context, conn *pgx.Conn, t tables, now time.Time, log *slog.Logger) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit

	// Wait for another process's migration however long it takes: the
	// connection's lock_timeout is for the Store's reads and writes.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0`); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, t.lockKey); err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	if t.schema != "" {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+t.schema); err != nil {
			return 0, fmt.Errorf("create schema %s: %w", t.schema, err)
		}
	} else if err := ensureSearchPath(ctx, tx); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t.migrations+` (
		version    INTEGER     PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL
	)`); err != nil {
		return 0, err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+t.migrations).Scan(&current); err != nil {
		return 0, err
	}
	if current > len(migrations) {
		return 0, fmt.Errorf("%w: schema version %d, this program knows %d", ErrSchemaVersion, current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		if _, err := tx.Exec(ctx, migrations[v-1](t)); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+t.migrations+` (version, applied_at) VALUES ($1, $2)`, v, now); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
		log.LogAttrs(ctx, slog.LevelInfo, "postgres: applied migration", slog.Int("version", v))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return len(migrations), nil
}

// ensureSearchPath creates the first schema of the search_path when none
// of its schemas exists, so that the unqualified tables have a home.
func ensureSearchPath(ctx context.Context, tx pgx.Tx) error {
	var current *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return fmt.Errorf("current schema: %w", err)
	}
	if current != nil {
		return nil
	}
	var path string
	if err := tx.QueryRow(ctx, `SHOW search_path`).Scan(&path); err != nil {
		return fmt.Errorf("search_path: %w", err)
	}
	name := firstSchema(path)
	if name == "" {
		return fmt.Errorf("no schema of the search_path (%s) exists: create one, "+
			"or name one with the URL's schema parameter (?schema=NAME)", path)
	}
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("no schema of the search_path (%s) exists, and creating schema %q failed: %w; "+
			"create it, or name an existing schema with the URL's schema or search_path parameter (?schema=NAME)",
			path, name, err)
	}
	return nil
}

// firstSchema returns the first schema of a search_path setting other than
// "$user", unquoted (and lowercased when it was not quoted, as the server
// does), or "" if there is none.
func firstSchema(path string) string {
	for rest := path; rest != ""; {
		rest = strings.TrimLeft(rest, " ,")
		var name string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest); i++ {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			name, rest = b.String(), rest[min(i+1, len(rest)):]
			if name == "$user" {
				name = ""
			}
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			name, rest = strings.ToLower(strings.TrimSpace(rest[:end])), rest[end:]
			if name == "$user" {
				name = ""
			}
		}
		if name != "" {
			return name
		}
	}
	return ""
}
