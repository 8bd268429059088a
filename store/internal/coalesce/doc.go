// Package coalesce runs store operations that wait for a connection
// together: when every sender is busy, the operations that arrive
// meanwhile go out as one batch (one round trip, one transaction, one
// commit) on the next free sender. The store adapters for PostgreSQL and
// SQLite share it.
package coalesce
