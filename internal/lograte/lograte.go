// Package lograte keeps a repeated log line from flooding a log: the line
// is written at most once an interval, with the number of times it was
// left out since it was last written.
package lograte

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limiter lets a repeated line through at most once an interval. Make it
// with [New]; it is safe for concurrent use.
type Limiter struct {
	s       rate.Sometimes
	skipped atomic.Int64
}

// New returns a limiter that lets the first line through, and then one
// line an interval.
func New(interval time.Duration) *Limiter {
	return &Limiter{s: rate.Sometimes{Interval: interval}}
}

// Do calls f when a line may be written now, with the number of calls of
// Do left out since f last ran; otherwise it counts this call as left out.
func (l *Limiter) Do(f func(skipped int64)) {
	ran := false
	l.s.Do(func() {
		ran = true
		f(l.skipped.Swap(0))
	})
	if !ran {
		l.skipped.Add(1)
	}
}
