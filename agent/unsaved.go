package agent

import (
	"sync"

	"github.com/calf-go/calf/internal/lru"
)

// unsavedResults keeps, in the process, the results of tool calls that
// were executed but could not be recorded in the store (a write failed), so
// that the redelivery of the call records the result it already has
// instead of executing the tool again. A result leaves when it is taken.
// It bounds what it keeps; a nil *unsavedResults keeps nothing.
type unsavedResults struct {
	mu      sync.Mutex
	results *lru.Cache[string, unsavedResult]
}

type unsavedResult struct {
	ev   ToolResultEvent
	data []byte // ev encoded
}

// maxUnsavedResults bounds the results kept; beyond it, the oldest one is
// dropped (its call will execute again when redelivered).
const maxUnsavedResults = 1024

func newUnsavedResults() *unsavedResults {
	return &unsavedResults{results: lru.New[string, unsavedResult](maxUnsavedResults, 0)}
}

// keep records the result of the call key.
func (u *unsavedResults) keep(key string, r unsavedResult) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.results.Add(key, r)
}

// take removes and returns the result kept for the call key.
func (u *unsavedResults) take(key string) (unsavedResult, bool) {
	if u == nil {
		return unsavedResult{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.results.Remove(key)
}
