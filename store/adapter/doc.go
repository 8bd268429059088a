// Package adapter is what a state-store adapter is built with: the
// checks and errors every implementation of [store.Store] makes the same
// way, so that they are written once. Calf's adapters (store/memory,
// store/sqlite, store/postgres, store/redis) use it, and so can an adapter
// of one's own, which then passes the conformance suite of
// [github.com/calf-go/calf/store/storetest].
//
// An adapter keeps a [Guard] and calls [Guard.Check] (or [CheckKind] and
// [Guard.Live] in List) first in every method, reports a failed
// compare-and-swap with [ConflictError] and a database's error with
// [Guard.Fail], and lists a prefix as the range [prefix, [PrefixEnd]).
// Users of a store need none of it: they read [store].
package adapter
