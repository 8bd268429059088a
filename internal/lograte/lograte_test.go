package lograte

import (
	"testing"
	"testing/synctest"
	"time"
)

// The first line goes through, the next ones within the interval are
// counted, and the count comes with the line after the interval.
func TestLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(time.Minute)
		var lines []int64
		for range 10 {
			l.Do(func(skipped int64) { lines = append(lines, skipped) })
		}
		if len(lines) != 1 || lines[0] != 0 {
			t.Fatalf("lines after 10 calls at once = %v, want [0]", lines)
		}
		time.Sleep(time.Minute)
		l.Do(func(skipped int64) { lines = append(lines, skipped) })
		if len(lines) != 2 || lines[1] != 9 {
			t.Fatalf("lines after the interval = %v, want [0 9]", lines)
		}
	})
}
