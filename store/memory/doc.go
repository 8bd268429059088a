// Package memory is an in-memory [store.Store].
//
// It keeps records in a map guarded by a mutex and copies data in and out,
// so callers never share a slice with the store. It is a complete
// implementation of the contract, compare-and-swap and ordered listing
// included, and passes the conformance suite in store/storetest: use it in
// tests, and in programs that need no durability.
//
// Records live as long as the Store, or until deleted: nothing is written
// to disk. A process that makes runs without end keeps its footprint
// bounded by removing the finished ones (agent.WorkerOptions.Retention,
// agent.Runtime.Sweep), as on every store.
package memory
