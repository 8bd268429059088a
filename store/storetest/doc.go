// Package storetest is the conformance suite for [store.Store] adapters.
//
// Every adapter's tests call [Run] with a function that opens a store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks the contract only: compare-and-swap versions, byte-exact
// data, independence of kinds, deletes, ordered and paged listing, key
// validation, concurrency, cancellation, closing and the absence of
// aliasing between the caller's slices and the stored data.
//
// # Shared backends
//
// Each subtest asks for a store of its own, but every kind it writes is
// unique to that run of the subtest, so newStore may hand out stores that
// share one database or server, even one that already holds data. The suite
// never lists or deletes a kind it did not create. It closes one of the
// stores it receives (to check the behaviour after Close), so newStore
// must not return the same value twice, and Close must tolerate a second
// call from the caller's cleanup.
//
// # Faults
//
// [WithFaults] wraps a store in a [FaultyStore] that injects failures, for
// testing what runs on top of a store: writes that fail, writes whose reply
// is lost after they landed, conflicts, other writers racing the caller,
// and failed or slow reads, on chosen calls ([Faults.Inject]) or at seeded
// random rates.
package storetest
