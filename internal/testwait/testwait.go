package testwait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// The interval between polls starts at firstInterval and doubles up to
// maxInterval.
const (
	firstInterval = time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// For calls cond until it returns true. When within passes first, or the
// test's context ends, it fails the test with a message naming what, the
// thing waited for ("the run to pause").
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ForErr(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// ForErr calls cond until it returns nil. When within passes first, or
// the test's context ends, it fails the test with a message naming what
// and the last error cond returned, which should say what is still
// missing ("2 answers, want 3").
func ForErr(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	err := poll(t, within, cond)
	if err == nil {
		return
	}
	why := fmt.Sprintf("timed out after %v", within)
	if t.Context().Err() != nil {
		why = "the test ended"
	}
	if errors.Is(err, errNotYet) {
		t.Fatalf("%s waiting for %s", why, what)
	}
	t.Fatalf("%s waiting for %s: %v", why, what, err)
}

// Until calls cond as For does, until it returns true or within passes
// or the test's context ends, and reports whether it returned true. It
// does not fail the test: it is for a wait whose outcome the test reports
// in its own way, and may be called from any goroutine.
func Until(t testing.TB, within time.Duration, cond func() bool) bool {
	return poll(t, within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

// errNotYet is what For's condition returns while it is false.
var errNotYet = errors.New("not yet")

// poll calls cond until it returns nil, within passes or t's context
// ends, and returns cond's last error.
func poll(t testing.TB, within time.Duration, cond func() error) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	interval := firstInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		wait := time.NewTimer(interval)
		select {
		case <-wait.C:
		case <-deadline.C:
			wait.Stop()
			// One last look: the condition may have come true meanwhile.
			return cond()
		case <-t.Context().Done():
			wait.Stop()
			return err
		}
		interval = min(2*interval, maxInterval)
	}
}
