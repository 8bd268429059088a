// Package testwait waits in tests for a condition to hold, instead of
// sleeping for a time that is either too long or, on a loaded machine,
// too short.
//
// [For] polls a condition that returns a bool, [ForErr] one that returns
// an error saying what is still missing; both poll at short intervals
// that grow to a bound, stop at the test's end, and fail the test with
// what was waited for when the time allowed passes. Call them from the
// test's goroutine: they end the test with [testing.TB.Fatalf]. [Until]
// polls the same way and reports whether the condition came true, for a
// test that reports a wait's outcome itself.
//
// Inside a [testing/synctest] bubble they poll on the bubble's clock.
//
// To show that something does not happen, wait for a positive sign that
// it has had its chance (a later message handled, a counter reached), or
// run the test in a synctest bubble and call [testing/synctest.Wait]; a sleep
// proves nothing on a slow machine.
package testwait
