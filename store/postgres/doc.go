// Package postgres is a [store.Store] kept in a PostgreSQL database, the
// store for Calf deployments that run several workers.
//
// # Opening
//
// [Open] takes a connection URL (postgres://user:password@host:5432/dbname,
// or any form pgx accepts) and optional [Options]. It brings the schema up
// to date: numbered migrations, recorded in the table
// calf_schema_migrations, run in one transaction under a transaction-scoped
// advisory lock, so that workers opening one database at the same moment
// migrate in turn and reopening applies only what is new. A database whose
// schema is newer than the program is refused with [ErrSchemaVersion].
//
// The tables go in the schema that [Options.Schema] or the URL's schema
// parameter names (postgres://host/db?schema=calf), created if it does not
// exist; deployments that share a database keep apart by using different
// schemas. Without one, they go in the first existing schema of the
// connection's search_path, usually public. When no schema of the
// search_path exists (a URL with ?search_path=calf, say), Open creates
// its first one other than "$user" in the migration transaction; if the
// role may not, Open's error names the missing schema.
//
// # Schema
//
// Records live in the table calf_records(kind, id, version, data,
// updated_at) with the primary key (kind, id). Kind, id and data are
// BYTEA: any Go string is a valid key, including NUL bytes and invalid
// UTF-8, and ids compare byte by byte whatever the database's collation,
// so List's order is Go's string order. List matches its prefix with a
// range of ids, never a pattern: % and _ are ordinary characters.
// updated_at is a timestamptz, kept to the microsecond.
//
// # Concurrency and failures
//
// Writes are single statements: a create is an INSERT that does nothing
// when the record exists, and a compare-and-swap is an UPDATE guarded by
// the expected version, so Stores in many processes may share the
// records. A Store keeps up to [Options.MaxConns] connections in a pgxpool
// pool ([DefaultMaxConns] by default, or the URL's pool_max_conns), which
// checks a connection that sat idle before reusing it. Each write is a
// commit of its own; under load, the server flushes the commits of
// concurrent connections to disk together, so a pool much smaller than
// the operations in flight makes writes queue for a connection. When the
// server closes them (a restart, a failover, pg_terminate_backend), the
// next operations open new ones: reads and deletes that hit a closed
// connection run again on a new one, and so does a write that never
// reached the server; a write whose fate is unknown returns its error, so
// that the caller (or the broker, by redelivering the message) decides. An
// unreachable server makes operations return an error wrapping the
// connection failure. Cancelling an operation's context asks the server to
// cancel its statement, so that a write waiting on a lock does not land
// after the caller has given up on it.
package postgres
