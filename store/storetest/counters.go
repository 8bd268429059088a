package storetest

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/calf-go/calf/store"
)

// Counters runs writers goroutines that each increment, increments times,
// a counter of its own and one it shares with three other writers (kind
// "count", ids "own-W" and "shared-W/4"), with [store.Update], then checks
// with [CheckCounters] that no increment was lost. writers must be a
// multiple of 4.
func Counters(t testing.TB, s store.Store, writers, increments int) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range increments {
				for _, id := range []string{fmt.Sprint("own-", w), fmt.Sprint("shared-", w%(writers/4))} {
					_, err := store.Update(ctx, s, "count", id, func(data []byte, exists bool) ([]byte, error) {
						n := 0
						if exists {
							n, _ = strconv.Atoi(string(data))
						}
						return strconv.AppendInt(nil, int64(n+1), 10), nil
					})
					if err != nil {
						t.Errorf("writer %d: update %s: %v", w, id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	CheckCounters(t, s, writers, increments)
}

// CheckCounters checks the counters that [Counters] left in s (or in a
// Store that reopened its data): each holds its count, at the version of
// as many writes.
func CheckCounters(t testing.TB, s store.Store, writers, increments int) {
	t.Helper()
	ctx := t.Context()
	for w := range writers {
		rec, err := s.Get(ctx, "count", fmt.Sprint("own-", w))
		if err != nil || string(rec.Data) != strconv.Itoa(increments) || rec.Version != int64(increments) {
			t.Errorf("writer %d's counter: %q at version %d, %v; want %d", w, rec.Data, rec.Version, err, increments)
		}
	}
	for i := range writers / 4 {
		rec, err := s.Get(ctx, "count", fmt.Sprint("shared-", i))
		if want := 4 * increments; err != nil || string(rec.Data) != strconv.Itoa(want) || rec.Version != int64(want) {
			t.Errorf("shared counter %d: %q at version %d, %v; want %d", i, rec.Data, rec.Version, err, want)
		}
	}
}
