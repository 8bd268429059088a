// Package sqlite is a [store.Store] kept in a SQLite database file, the
// embedded durable default of Calf. It needs no cgo.
//
// # Opening
//
// [Open] takes a file path and optional [Options]; [DefaultPath] gives the
// location a program uses when the user chose none
// ($XDG_DATA_HOME/calf/calf.db, else ~/.local/share/calf/calf.db). Open
// creates the file and its directory if needed and brings the schema up to
// date: numbered migrations, recorded in the table schema_migrations, run
// in one transaction, so reopening an existing file keeps its records and
// applies only what is new.
//
// # Concurrency
//
// The database is in WAL mode with synchronous=NORMAL: a write is durable
// against a crash of the process, and the last writes before a power loss
// or an operating system crash may be lost; [Options.FullSync]
// (synchronous=FULL) makes each commit wait for the disk instead. A Store
// writes through a single connection, so writes from many goroutines queue
// rather than fail with SQLITE_BUSY, and it reads through a pool of
// read-only connections that run alongside the writer. Other processes may
// open the same file; a write waits up to [Options.BusyTimeout] for their
// locks.
//
// Puts that arrive while the write connection is busy are committed
// together, in one transaction: one commit (and, with FullSync, one fsync)
// for all of them, each with its own outcome (a Put whose version does not
// match writes nothing and leaves the others be). A Put that finds the
// connection free is committed alone at once. A Put whose context ends
// while it waits is not written; one whose context ends while its batch
// commits may be, as any write whose commit was under way.
//
// # Schema
//
// Records live in the table records(kind, id, version, data, updated_at)
// with the primary key (kind, id); updated_at holds Unix nanoseconds. Ids
// compare byte by byte, so List's order is Go's string order, and a List
// prefix is matched literally: % and _ are ordinary characters.
package sqlite
