package agent

import (
	"bytes"
	"slices"
	"sync"
)

// stateCache keeps the last decoded state of recently active runs, so that
// a handler that reads a run its process wrote or read a moment ago does not
// decode it again. An entry is used only when the stored bytes are exactly
// the cached ones (a comparison is far cheaper than decoding JSON), so the
// cache can never return a state other than the stored one, whoever wrote
// it.
type stateCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cachedState
}

type cachedState struct {
	data []byte
	st   *RunState
}

const stateCacheSize = 4096

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, entries: make(map[string]cachedState, max)}
}

// decode returns the state stored as data for run id, from the cache or by
// decoding it.
func (c *stateCache) decode(id string, data []byte) (*RunState, error) {
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && bytes.Equal(e.data, data) {
		return e.st.clone(), nil
	}
	st, err := DecodeRunState(data)
	if err != nil {
		return nil, err
	}
	c.put(id, data, st)
	return st, nil
}

// put records that data encodes st. The cache keeps its own copy of st.
func (c *stateCache) put(id string, data []byte, st *RunState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; !ok && len(c.entries) >= c.max {
		for k := range c.entries { // evict an arbitrary entry
			delete(c.entries, k)
			break
		}
	}
	c.entries[id] = cachedState{data: data, st: st.clone()}
}

// clone returns a copy of s that shares no mutable memory with it: slices
// are clipped so that appends reallocate, and the pending calls, which
// handlers change in place, are copied.
func (s *RunState) clone() *RunState {
	c := *s
	c.Messages = slices.Clip(s.Messages)
	c.ToolCalls = slices.Clip(s.ToolCalls)
	c.Pending = slices.Clone(s.Pending)
	return &c
}
