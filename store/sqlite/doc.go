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
// may be lost. A Store writes through a single connection, so writes from
// many goroutines queue rather than fail with SQLITE_BUSY, and it reads
// through a pool of read-only connections that run alongside the writer.
// Other processes may open the same file; a write waits up to
// [Options.BusyTimeout] for their locks.
//
// # Schema
//
// Records live in the table records(kind, id, version, data, updated_at)
// with the primary key (kind, id); updated_at holds Unix nanoseconds. Ids
// compare byte by byte, so List's order is Go's string order, and a List
// prefix is matched literally: % and _ are ordinary characters.
package sqlite
