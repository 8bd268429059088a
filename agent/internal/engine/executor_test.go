package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testwait"
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
	testwait.For(t, 10*time.Second, "two goroutines waiting for calls", func() bool { return e.idleCount() == 2 })

	// A waiting goroutine takes the next calls: no new one is started.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		e.Run(wg.Done)
		wg.Wait()
		testwait.For(t, 10*time.Second, "the goroutine back to waiting", func() bool { return e.idleCount() >= 2 })
		if n := e.idleCount(); n != 2 {
			t.Fatalf("call %d: %d goroutines wait for calls, want the same 2", i, n)
		}
	}
	// With no calls, the goroutines end.
	testwait.For(t, 10*time.Second, "the waiting goroutines ended", func() bool { return e.idleCount() == 0 })
	// And a later call starts a new one.
	ran := make(chan struct{})
	e.Run(func() { close(ran) })
	<-ran
}
