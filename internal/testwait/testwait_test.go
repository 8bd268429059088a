package testwait_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf/internal/testwait"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so that the failure of For and ForErr can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	// Fatalf does not return: end the goroutine as the testing package does.
	panic(r)
}

// run calls f with a recorder and returns the failure it recorded.
func run(t *testing.T, f func(testing.TB)) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	f(r)
	return r.failed
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		start := time.Now()
		failed := run(t, func(tb testing.TB) {
			testwait.For(tb, time.Minute, "the third call", func() bool { return calls.Add(1) == 3 })
		})
		if failed != "" {
			t.Fatalf("failed: %s", failed)
		}
		if calls.Load() != 3 {
			t.Errorf("%d calls, want 3", calls.Load())
		}
		if d := time.Since(start); d > 10*time.Millisecond {
			t.Errorf("waited %v for the third call, want the first intervals short", d)
		}
	})
}

func TestForFailsWithWhatOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		start := time.Now()
		failed := run(t, func(tb testing.TB) {
			testwait.For(tb, 5*time.Second, "the impossible", func() bool { calls.Add(1); return false })
		})
		if want := "timed out after 5s waiting for the impossible"; failed != want {
			t.Errorf("failure %q, want %q", failed, want)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("gave up after %v, want 5s", d)
		}
		// 1, 2, 4 … 32 ms, then every 50 ms: about a hundred calls.
		if n := calls.Load(); n < 90 || n > 110 {
			t.Errorf("%d calls in 5s, want about 100", n)
		}
	})
}

func TestForErrReportsTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		failed := run(t, func(tb testing.TB) {
			testwait.ForErr(tb, time.Second, "three answers", func() error {
				return fmt.Errorf("%d answers", calls.Add(1))
			})
		})
		want := fmt.Sprintf("timed out after 1s waiting for three answers: %d answers", calls.Load())
		if failed != want {
			t.Errorf("failure %q, want %q", failed, want)
		}
	})
}

func TestForErrLooksOnceMoreAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		failed := run(t, func(tb testing.TB) {
			testwait.ForErr(tb, time.Second, "the second", func() error {
				if time.Since(start) < time.Second {
					return errors.New("too early")
				}
				return nil
			})
		})
		if failed != "" {
			t.Errorf("failed: %s", failed)
		}
	})
}

// endedTB is a recorder whose test has ended: its context is done.
type endedTB struct{ *recorder }

func (e endedTB) Context() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestForStopsWhenTheTestEnds(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		testwait.For(endedTB{r}, time.Hour, "the ended test", func() bool { return false })
	}()
	if want := "the test ended waiting for the ended test"; r.failed != want {
		t.Errorf("failure %q, want %q", r.failed, want)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("waited %v after the test ended", d)
	}
}

func TestUntilReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		if !testwait.Until(t, time.Minute, func() bool { return calls.Add(1) == 3 }) {
			t.Error("Until = false for a condition that came true")
		}
		start := time.Now()
		if testwait.Until(t, time.Second, func() bool { return false }) {
			t.Error("Until = true for a condition that never held")
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Until gave up after %v, want 1s", d)
		}
	})
}
