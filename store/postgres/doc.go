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
// checks a connection that sat idle before reusing it.
//
// A quarter of the pool (at least one connection) sends Gets, Puts and
// Deletes. An operation that finds one of those connections free goes out
// alone, as a statement of its own. The operations that arrive while all of them are
// busy wait, and go out together on the next one free: one round trip and
// one transaction for up to 64 of them, ordered by record so that two
// batches never wait for each other's row locks in a cycle, and committed
// with a single flush to disk, where separate statements would each wait
// for their own. Each operation of a batch still has its own outcome: a
// conflict is a conflict of that Put alone. If a batch fails (a statement
// of it failed, which aborts the transaction, so that nothing of it was
// written), its operations run again alone. The connections' lock_timeout
// is 5 seconds unless the URL sets one: a write waiting that long for a row
// lock, which only another session's open transaction holds that long,
// fails with the server's lock_not_available error rather than hold up the
// operations batched with it.
//
// When the server closes connections (a restart, a failover,
// pg_terminate_backend), the next operations open new ones: reads and
// deletes that hit a closed connection run again on a new one, and so
// does a write that never reached the server; a write whose fate is
// unknown returns its error, so that the caller (or the broker, by
// redelivering the message) decides. An unreachable server makes
// operations return an error wrapping the connection failure. Cancelling
// an operation's context returns at once if it has not gone out; if it
// went out alone, the Store asks the server to cancel its statement and
// waits for the answer, so that a write waiting on a lock does not land
// after the caller has given up on it. A batch runs to its end whatever
// the contexts of its operations: a caller that stops waiting for its
// write learns no more of it than of any write whose commit was under way.
package postgres
