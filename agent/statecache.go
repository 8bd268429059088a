package agent

import (
	"bytes"
	"slices"
	"sync"

	"github.com/calf-go/calf/internal/lru"
	"github.com/calf-go/calf/store"
)

// stateCache keeps the last decoded state of recently active runs, with
// the bytes and version they were stored as, so that a handler that reads a
// run its process wrote or read a moment ago does not decode it again, and
// one that updates it need not read it first. A decoded entry is used only
// when the stored bytes are exactly the cached ones (a comparison is far
// cheaper than decoding JSON), so decoding can never return a state other
// than the stored one, whoever wrote it. An entry used without reading the
// store (latest) may be behind the store, when another process wrote the
// run since: callers either write it with a compare-and-swap at its version
// (which then conflicts) or read the store before acting on what it does
// not show.
type stateCache struct {
	mu      sync.Mutex
	entries *lru.Cache[string, cachedState]
}

type cachedState struct {
	data    []byte
	version int64
	st      *runState
	// born reports that this process created the run (its input
	// handler did), and recorded the ids of the calls whose results this
	// process recorded, for a runtime whose broker is local (see
	// Runtime.local).
	born     bool
	recorded []string
}

const stateCacheSize = 4096

func newStateCache(max int) *stateCache {
	return &stateCache{entries: lru.New[string, cachedState](max, 0)}
}

// decode returns the state stored as data for run id, from the cache or by
// decoding it. version, when positive, is the version data was read at:
// the cache then keeps the decoded state.
func (c *stateCache) decode(id string, data []byte, version int64) (*runState, error) {
	c.mu.Lock()
	e, ok := c.entries.Get(id)
	c.mu.Unlock()
	if ok && bytes.Equal(e.data, data) {
		if version > e.version {
			c.put(id, data, version, e.st)
		}
		return e.st.clone(), nil
	}
	st, err := decodeRunState(data)
	if err != nil {
		return nil, err
	}
	if version > 0 {
		c.put(id, data, version, st)
	}
	return st, nil
}

// put records that data, stored at version, encodes st, unless the cache
// holds a later version. The cache keeps its own copy of st.
func (c *stateCache) put(id string, data []byte, version int64, st *runState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Get(id)
	if ok && e.version > version {
		return
	}
	c.set(id, cachedState{data: data, version: version, st: st.clone(), born: e.born, recorded: e.recorded})
}

// putBorn is put for the state of a run this process has just created.
func (c *stateCache) putBorn(id string, data []byte, version int64, st *runState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(id, cachedState{data: data, version: version, st: st.clone(), born: true})
}

// set makes e the entry of run id, evicting the least recently used
// entry when the cache is full and has none for id. c.mu is held.
func (c *stateCache) set(id string, e cachedState) {
	c.entries.Add(id, e)
}

// unrecorded reports whether this process created run id and has not
// recorded a result for its call: for a local broker, no one else has.
func (c *stateCache) unrecorded(id, call string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Get(id)
	return ok && e.born && !slices.Contains(e.recorded, call)
}

// recordedResult notes that a result of the call of run id is recorded.
func (c *stateCache) recordedResult(id, call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries.Get(id); ok && e.born && !slices.Contains(e.recorded, call) {
		e.recorded = append(slices.Clip(e.recorded), call)
		c.entries.Add(id, e)
	}
}

// latest returns a copy of the cached state of run id, with the record it
// was stored as, without reading the store: it may be behind the store.
func (c *stateCache) latest(id string) (*runState, store.Record, bool) {
	return c.latestIf(id, nil)
}

// latestIf is latest for a cached state that satisfies ok (any, when ok
// is nil), which must not change it; it copies no state that does not.
func (c *stateCache) latestIf(id string, ok func(*runState) bool) (*runState, store.Record, bool) {
	c.mu.Lock()
	e, found := c.entries.Get(id)
	c.mu.Unlock()
	if !found || (ok != nil && !ok(e.st)) {
		return nil, store.Record{}, false
	}
	return e.st.clone(), e.record(id), true
}

// record returns the record the cached state of run id was stored as,
// without copying the state.
func (c *stateCache) record(id string) (store.Record, bool) {
	c.mu.Lock()
	e, ok := c.entries.Get(id)
	c.mu.Unlock()
	if !ok {
		return store.Record{}, false
	}
	return e.record(id), true
}

// record is the record of run id that e was stored as.
func (e cachedState) record(id string) store.Record {
	return store.Record{Kind: store.KindRun, ID: id, Version: e.version, Data: e.data}
}

// clone returns a copy of s that shares no mutable memory with it: slices
// are clipped so that appends reallocate, and the pending calls, which
// handlers change in place, are copied.
func (s *runState) clone() *runState {
	c := *s
	c.Messages = slices.Clip(s.Messages)
	c.ToolCalls = slices.Clip(s.ToolCalls)
	c.Pending = slices.Clone(s.Pending)
	return &c
}

// forget drops what the cache holds of run id.
func (c *stateCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(id)
}
