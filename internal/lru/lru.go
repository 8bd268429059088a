package lru

// Cache maps keys to values, at most a number of entries and, when it has
// a cost bound, at most a total cost; adding past a bound evicts the
// entries used least recently. Get and Add count as uses; Peek does not.
// The zero value is not usable: make one with [New].
type Cache[K comparable, V any] struct {
	maxLen  int
	maxCost int
	cost    int
	m       map[K]*entry[K, V]
	// root is the sentinel of a ring of the entries, the most recently
	// used first (root.next) and the least recently used last
	// (root.prev).
	root entry[K, V]
}

type entry[K comparable, V any] struct {
	key        K
	value      V
	cost       int
	prev, next *entry[K, V]
}

// New returns a cache of at most maxLen entries (at least 1) whose costs
// add up to at most maxCost; maxCost <= 0 sets no bound on the cost.
func New[K comparable, V any](maxLen, maxCost int) *Cache[K, V] {
	c := &Cache[K, V]{maxLen: max(maxLen, 1), maxCost: maxCost, m: map[K]*entry[K, V]{}}
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return len(c.m) }

// Cost returns the total cost of the entries.
func (c *Cache[K, V]) Cost() int { return c.cost }

// Get returns the value of key and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	e, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.value, true
}

// Peek returns the value of key without marking it used.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	e, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Add is AddCost with a cost of 0.
func (c *Cache[K, V]) Add(key K, value V) { c.AddCost(key, value, 0) }

// AddCost makes value, of cost, the value of key and marks it the most
// recently used, evicting the least recently used entries until the cache
// is within its bounds. A value whose cost alone is above the cache's cost
// bound is not kept, and key then has no value. It reports whether the
// value was kept.
func (c *Cache[K, V]) AddCost(key K, value V, cost int) bool {
	if c.maxCost > 0 && cost > c.maxCost {
		c.Remove(key)
		return false
	}
	// What the cache must make room for: nothing when key is updated in
	// place (it is then in front, and never the entry at the back unless
	// it is alone, when it fits), a new entry of cost otherwise.
	room, more := 0, 0
	e, ok := c.m[key]
	if ok {
		c.cost += cost - e.cost
		e.value, e.cost = value, cost
		c.unlink(e)
		c.pushFront(e)
	} else {
		room, more = 1, cost
	}
	var free *entry[K, V]
	for len(c.m)+room > c.maxLen || (c.maxCost > 0 && c.cost+more > c.maxCost) {
		free = c.root.prev
		c.remove(free)
	}
	if ok {
		return true
	}
	// Reuse an evicted entry rather than allocate one.
	if free == nil {
		free = &entry[K, V]{}
	}
	*free = entry[K, V]{key: key, value: value, cost: cost}
	c.m[key] = free
	c.cost += cost
	c.pushFront(free)
	return true
}

// Remove removes the entry of key, returning its value.
func (c *Cache[K, V]) Remove(key K) (V, bool) {
	e, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.remove(e)
	return e.value, true
}

func (c *Cache[K, V]) remove(e *entry[K, V]) {
	c.unlink(e)
	delete(c.m, e.key)
	c.cost -= e.cost
}

func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	e.prev = &c.root
	e.next = c.root.next
	c.root.next.prev = e
	c.root.next = e
}
