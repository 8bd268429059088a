package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
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

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, t.lockKey); err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	if t.schema != "" {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+t.schema); err != nil {
			return 0, err
		}
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
