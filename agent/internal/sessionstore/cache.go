package sessionstore

import (
	"bytes"
	"slices"
	"sync"

	"github.com/calf-go/calf/internal/lru"
	"github.com/calf-go/calf/model"
)

// cache keeps the messages of recently used sessions, each with the
// bytes of the session record they are the messages of, so that the
// process that ran a session's last turn does not read all of its
// messages from the store again for the next one. A run in a session still
// reads the session's record; it takes the messages from the cache only
// when that record is byte for byte the cached one, and from the store
// otherwise. Whoever writes a session changes its record's bytes (its
// update time and lists change with every write, its epoch when it is
// replaced), and the messages of a record never change: the parts it lists
// are each written once, with the same content on every attempt. So a
// cached entry can be out of date, and then unused, but never wrong.
//
// The cache is bounded by sessions and by the size of the messages' JSON
// as stored, evicting the sessions used least recently; a session larger
// than the bound is not kept.
type cache struct {
	mu      sync.Mutex
	entries *lru.Cache[string, *cachedSession] // cost: the size as stored
}

type cachedSession struct {
	raw  []byte          // the session's record
	msgs []model.Message // its messages; the cache owns the array
	size int             // their size as stored, in bytes
}

// The bounds of a runtime's cache.
const (
	cacheSessions = 1024
	cacheBytes    = 64 << 20
)

func newCache(maxN, maxSize int) *cache {
	return &cache{entries: lru.New[string, *cachedSession](maxN, maxSize)}
}

// messages returns the cached messages of session id when raw is its
// cached record. The slice is clipped: appending to it copies. A nil
// cache, like every method's, keeps nothing.
func (c *cache) messages(id string, raw []byte) ([]model.Message, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Get(id)
	if !ok || !bytes.Equal(e.raw, raw) {
		return nil, false
	}
	return slices.Clip(e.msgs), true
}

// set caches msgs, of size bytes as stored, as the messages of session id
// at its record raw.
func (c *cache) set(id string, raw []byte, msgs []model.Message, size int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(id, &cachedSession{raw: raw, msgs: slices.Clip(msgs), size: size})
}

// moved records that the record of session id went from old to raw,
// adding added (of size bytes as stored) to its messages: an entry cached
// at old moves to raw with them. Any other entry of the session goes.
func (c *cache) moved(id string, old, raw []byte, added []model.Message, size int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Peek(id)
	if !ok {
		return
	}
	if !bytes.Equal(e.raw, old) {
		c.entries.Remove(id)
		return
	}
	// Appending in place is safe: callers hold clipped slices, which the
	// elements after their length do not belong to.
	c.put(id, &cachedSession{raw: raw, msgs: append(e.msgs, added...), size: e.size + size})
}

// forget drops the entry of session id.
func (c *cache) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(id)
}

// put makes e the entry of session id, evicting the least recently used
// entries while the cache is over its bounds; an entry larger than the
// bound on its own is not kept. c.mu is held.
func (c *cache) put(id string, e *cachedSession) {
	c.entries.AddCost(id, e, e.size)
}
