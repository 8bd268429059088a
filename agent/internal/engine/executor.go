package engine

import (
	"slices"
	"sync"
	"time"
)

// Executor runs tool calls on goroutines that it keeps for the next call. A
// call started on a new goroutine would begin on a small stack and grow it:
// decoding and validating a tool's arguments go deep, and copying the stack
// as it grew was 7% of the CPU of a one-tool run (BenchmarkRunW1). A kept
// goroutine waits idleExecutorTimeout for another call, then ends; one
// running a tool that outlives its timeout goes back to waiting when the
// tool returns. The zero value is ready to use.
type Executor struct {
	mu   sync.Mutex
	idle []chan func() // goroutines waiting for a call, most recent last
}

// idleExecutorTimeout is how long a goroutine of an executor waits for
// another call before it ends.
const idleExecutorTimeout = time.Second

// Run calls f on a goroutine of e: a waiting one, or a new one.
func (e *Executor) Run(f func()) {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		w := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		w <- f
		return
	}
	e.mu.Unlock()
	go e.work(f)
}

// work calls f, then the calls handed to it, until none comes for
// idleExecutorTimeout.
func (e *Executor) work(f func()) {
	wake := make(chan func(), 1)
	var timer *time.Timer
	for f != nil {
		f()
		f = nil
		if timer == nil {
			timer = time.NewTimer(idleExecutorTimeout)
		} else {
			timer.Reset(idleExecutorTimeout)
		}
		e.mu.Lock()
		e.idle = append(e.idle, wake)
		e.mu.Unlock()
		select {
		case f = <-wake:
			timer.Stop()
		case <-timer.C:
			e.mu.Lock()
			if i := slices.Index(e.idle, wake); i >= 0 {
				e.idle = slices.Delete(e.idle, i, i+1)
			} else {
				// Handed a call just as the time ran out.
				f = <-wake
			}
			e.mu.Unlock()
		}
	}
}
