// Package store defines the state-store contract of Calf and the helpers
// built on it.
//
// A [Store] keeps versioned records addressed by a kind and an id. Every
// write is a compare-and-swap on the record's version, so that two workers
// that handle the same run can never overwrite each other's effect: one
// wins, the other gets [ErrConflict], reloads and decides again. Runs,
// sessions (conversation history), tool results, idempotency records and
// workflow checkpoints are all records of their own kind.
//
// Adapters live in subpackages named after what they wrap:
//
//   - [github.com/calf-go/calf/store/memory]: in memory, for tests and
//     single processes; nothing survives a restart.
//   - [github.com/calf-go/calf/store/sqlite]: the embedded durable default,
//     a SQLite file (modernc.org/sqlite, no cgo).
//   - [github.com/calf-go/calf/store/postgres]: PostgreSQL, on pgx.
//   - [github.com/calf-go/calf/store/redis]: Redis, compare-and-swap in Lua.
//
// Each passes the conformance suite in
// [github.com/calf-go/calf/store/storetest], which also provides a
// fault-injecting wrapper. Package [github.com/calf-go/calf/adapters]
// opens any of them by URL. An adapter is built with
// [github.com/calf-go/calf/store/adapter]: the key checks, the closed
// state, the errors and the prefix ranges every adapter shares.
package store
