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
// Adapters live in subpackages named after what they wrap: store/memory,
// store/sqlite. Each passes the conformance suite in store/storetest.
package store
