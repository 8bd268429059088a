//go:build !race

package e2e

// raceEnabled reports whether the tests run with the race detector, so that
// the binary under test is built the same way and reuses the build cache.
const raceEnabled = false
