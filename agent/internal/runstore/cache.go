package runstore

import (
	"bytes"
	"slices"
	"sync"

	"github.com/calf-go/calf/internal/lru"
	"github.com/calf-go/calf/store"
)

// Cache keeps the last decoded state S of recently active runs, with the
// bytes and version they were stored as, so that a handler that reads a
// run its process wrote or read a moment ago does not decode it again, and
// one that updates it need not read it first. A decoded entry is used only
// when the stored bytes are exactly the cached ones (a comparison is far
// cheaper than decoding JSON), so decoding can never return a state other
// than the stored one, whoever wrote it. An entry used without reading the
// store (Latest) may be behind the store, when another process wrote the
// run since: callers either write it with a compare-and-swap at its version
// (which then conflicts) or read the store before acting on what it does
// not show.
//
// The cache hands out copies of what it keeps, made by its clone function,
// and keeps copies of what it is given: a caller may change the state it
// holds as the copy allows (see NewCache).
type Cache[S any] struct {
	decode func([]byte) (S, error)
	clone  func(S) S

	mu      sync.Mutex
	entries *lru.Cache[string, entry[S]]
}

type entry[S any] struct {
	data    []byte
	version int64
	st      S
	// born reports that this process created the run (PutBorn), and
	// recorded the ids of the calls whose results this process recorded
	// (RecordedResult).
	born     bool
	recorded []string
}

// The bounds of a runtime's cache: how many runs it keeps, and how many
// bytes their stored states may take together (their decoded states take
// about as much again). The cache serves the runs a process is working on
// now; a run that waits (for an approval, a signal, a timer) is read again
// when it resumes, so a burst of runs that then wait leaves no more than
// these bounds behind (and the engine forgets a run that starts to wait
// for a person or a signal at once: it leaves nothing).
const (
	DefaultSize  = 1024
	DefaultBytes = 16 << 20
)

// NewCache returns a cache of at most max runs whose stored states take at
// most maxBytes together (maxBytes <= 0: no bound on the bytes), the least
// recently used evicted first; a state whose stored bytes alone are over
// maxBytes is not kept. decode decodes a stored state; clone returns a copy
// of a state that the cache's copy does not see changed by what its callers
// do to it.
func NewCache[S any](max, maxBytes int, decode func([]byte) (S, error), clone func(S) S) *Cache[S] {
	return &Cache[S]{decode: decode, clone: clone, entries: lru.New[string, entry[S]](max, maxBytes)}
}

// add keeps e as the entry of run id, at the cost of its stored bytes.
func (c *Cache[S]) add(id string, e entry[S]) { c.entries.AddCost(id, e, len(e.data)) }

// Decode returns the state stored as data for run id, from the cache or by
// decoding it. version, when positive, is the version data was read at:
// the cache then keeps the decoded state.
func (c *Cache[S]) Decode(id string, data []byte, version int64) (S, error) {
	c.mu.Lock()
	e, ok := c.entries.Get(id)
	c.mu.Unlock()
	if ok && bytes.Equal(e.data, data) {
		if version > e.version {
			c.Put(id, data, version, e.st)
		}
		return c.clone(e.st), nil
	}
	st, err := c.decode(data)
	if err != nil {
		var zero S
		return zero, err
	}
	if version > 0 {
		c.Put(id, data, version, st)
	}
	return st, nil
}

// Put records that data, stored at version, encodes st, unless the cache
// holds a later version. The cache keeps its own copy of st.
func (c *Cache[S]) Put(id string, data []byte, version int64, st S) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Get(id)
	if ok && e.version > version {
		return
	}
	c.add(id, entry[S]{data: data, version: version, st: c.clone(st), born: e.born, recorded: e.recorded})
}

// PutBorn is Put for the state of a run this process has just created.
func (c *Cache[S]) PutBorn(id string, data []byte, version int64, st S) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(id, entry[S]{data: data, version: version, st: c.clone(st), born: true})
}

// Unrecorded reports whether this process created run id and has not
// recorded a result for its call: for a local broker, no one else has.
func (c *Cache[S]) Unrecorded(id, call string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Get(id)
	return ok && e.born && !slices.Contains(e.recorded, call)
}

// RecordedResult notes that a result of the call of run id is recorded.
func (c *Cache[S]) RecordedResult(id, call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries.Get(id); ok && e.born && !slices.Contains(e.recorded, call) {
		e.recorded = append(slices.Clip(e.recorded), call)
		c.add(id, e)
	}
}

// Latest returns a copy of the cached state of run id, with the record it
// was stored as, without reading the store: it may be behind the store.
func (c *Cache[S]) Latest(id string) (S, store.Record, bool) {
	return c.LatestIf(id, nil)
}

// LatestIf is Latest for a cached state that satisfies ok (any, when ok
// is nil), which must not change it; it copies no state that does not.
func (c *Cache[S]) LatestIf(id string, ok func(S) bool) (S, store.Record, bool) {
	c.mu.Lock()
	e, found := c.entries.Get(id)
	c.mu.Unlock()
	if !found || (ok != nil && !ok(e.st)) {
		var zero S
		return zero, store.Record{}, false
	}
	return c.clone(e.st), e.record(id), true
}

// Record returns the record the cached state of run id was stored as,
// without copying the state.
func (c *Cache[S]) Record(id string) (store.Record, bool) {
	c.mu.Lock()
	e, ok := c.entries.Get(id)
	c.mu.Unlock()
	if !ok {
		return store.Record{}, false
	}
	return e.record(id), true
}

// record is the record of run id that e was stored as.
func (e entry[S]) record(id string) store.Record {
	return store.Record{Kind: store.KindRun, ID: id, Version: e.version, Data: e.data}
}

// Forget drops what the cache holds of run id.
func (c *Cache[S]) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(id)
}
