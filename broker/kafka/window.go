package kafka

import "time"

// maxRemembered bounds the message ids a partition's worker remembers for
// its duplicate window.
const maxRemembered = 10000

// window remembers the ids of the messages a worker settled recently, so
// that a message published again with the id of one of them is dropped.
type window struct {
	span time.Duration
	now  func() time.Time
	ids  map[string]int // id → how many entries of ring hold it
	ring []entry        // oldest first
}

type entry struct {
	id string
	at time.Time
}

func newWindow(span time.Duration, now func() time.Time) *window {
	return &window{span: span, now: now, ids: map[string]int{}}
}

// has reports whether id was settled within the window.
func (w *window) has(id string) bool {
	if w.span <= 0 || id == "" {
		return false
	}
	w.expire()
	return w.ids[id] > 0
}

// add remembers id as settled now.
func (w *window) add(id string) {
	if w.span <= 0 || id == "" {
		return
	}
	w.expire()
	if len(w.ring) >= maxRemembered {
		w.drop()
	}
	w.ring = append(w.ring, entry{id, w.now()})
	w.ids[id]++
}

// expire forgets the ids settled before the window.
func (w *window) expire() {
	cutoff := w.now().Add(-w.span)
	for len(w.ring) > 0 && w.ring[0].at.Before(cutoff) {
		w.drop()
	}
}

// drop forgets the oldest entry.
func (w *window) drop() {
	e := w.ring[0]
	w.ring[0] = entry{}
	w.ring = w.ring[1:]
	if w.ids[e.id]--; w.ids[e.id] <= 0 {
		delete(w.ids, e.id)
	}
}
