package redis

import (
	"errors"
	"io"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// unavailable reports whether err shows a server that cannot be reached for
// now: no connection, a broken one, a pool that cannot get one, or a
// server that refuses work while it loads its data, fails over or is
// read-only as a replica. Brokers retry through such errors.
func unavailable(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, goredis.ErrPoolExhausted) {
		return true
	}
	if goredis.IsLoadingError(err) || goredis.IsReadOnlyError(err) || goredis.IsClusterDownError(err) ||
		goredis.IsTryAgainError(err) || goredis.IsMasterDownError(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "connection reset")
}
