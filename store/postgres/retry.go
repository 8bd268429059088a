package postgres

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxAttempts bounds how often an operation runs when the server keeps
// closing the connections it gets.
const maxAttempts = 3

// retry runs fn on a connection of the pool. When the connection breaks
// under it (the server restarted, or closed the connection), the pool
// drops its other idle connections, which most likely broke with it, and
// fn runs again on a new connection if that is safe: always when
// idempotent, else only when the statement never reached the server.
func (s *Store) retry(ctx context.Context, op string, idempotent bool, fn func(*pgx.Conn) error) error {
	for attempt := 1; ; attempt++ {
		lost, err := s.pool.with(ctx, fn)
		if err == nil || !lost || ctx.Err() != nil || s.guard.Closed() {
			return err
		}
		s.pool.dropIdle()
		if attempt == maxAttempts || !(idempotent || safeToRetry(err)) {
			return err
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, "postgres: connection lost; retrying on a new one",
			slog.String("op", op), slog.Int("attempt", attempt), slog.Any("err", err))
	}
}

// safeToRetry reports whether err shows that the statement never reached
// the server.
func safeToRetry(err error) bool { return pgconn.SafeToRetry(err) }
