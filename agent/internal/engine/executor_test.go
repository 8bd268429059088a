package engine

import (
	"sync"
	"testing"
	"time"
)

// idleCount returns how many goroutines of e wait for a call.
func (e *Executor) idleCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.idle)
}

func TestExecutorKeepsAndEndsGoroutines(t *testing.T) {
	var e Executor
	release := make(chan struct{})
	blocked := make(chan struct{})
	e.Run(func() {
		close(blocked)
		<-release
	})
	<-blocked
	// A call that blocks holds up no other: this one runs on a new goroutine.
	done := make(chan struct{})
	e.Run(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a second call waited for a blocked one")
	}
	close(release)
	waitFor(t, func() bool { return e.idleCount() == 2 }, "two goroutines waiting for calls")

	// A waiting goroutine takes the next calls: no new one is started.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		e.Run(wg.Done)
		wg.Wait()
		waitFor(t, func() bool { return e.idleCount() >= 2 }, "the goroutine back to waiting")
		if n := e.idleCount(); n != 2 {
			t.Fatalf("call %d: %d goroutines wait for calls, want the same 2", i, n)
		}
	}
	// With no calls, the goroutines end.
	waitFor(t, func() bool { return e.idleCount() == 0 }, "the waiting goroutines ended")
	// And a later call starts a new one.
	ran := make(chan struct{})
	e.Run(func() { close(ran) })
	<-ran
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
