package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
)

// ErrSchemaVersion is returned by [Open] when the database was written by a
// newer version of this package, with migrations this one does not know.
var ErrSchemaVersion = errors.New("sqlite: database schema is newer than this program")

// migrations are the schema changes in order: migrations[i] brings the
// schema to version i+1. Append only; never edit one that has shipped.
var migrations = []string{
	`CREATE TABLE records (
		kind       TEXT    NOT NULL,
		id         TEXT    NOT NULL,
		version    INTEGER NOT NULL,
		data       BLOB    NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (kind, id)
	)`,
}

// migrate applies the migrations db lacks, all in one transaction, and
// returns the schema version. db must start its transactions with BEGIN
// IMMEDIATE so that two processes opening one file migrate in turn.
func migrate(ctx context.Context, db *sql.DB, now int64, log *slog.Logger) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // a no-op after Commit

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return 0, err
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return 0, err
	}
	if current > len(migrations) {
		return 0, fmt.Errorf("%w: schema version %d, this program knows %d", ErrSchemaVersion, current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, now); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v, err)
		}
		log.LogAttrs(ctx, slog.LevelInfo, "sqlite: applied migration", slog.Int("version", v))
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return len(migrations), nil
}
