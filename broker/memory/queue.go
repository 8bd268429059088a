package memory

import (
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// keyQueue holds the unacknowledged messages of one key in a group, in
// publish order; its first message is the one being handled or waiting
// for a redelivery. A message without a key gets a queue of its own.
type keyQueue struct {
	key   string
	anon  bool          // a keyless message's queue, not in the group's map
	owner *subscription // the member the key is pinned to while queued

	msgs  delivery.Queue[*calf.Message]
	track delivery.Tracker // failures in a row of the first message
	tries int              // deliveries of the first message, interrupted ones included

	nextReady *keyQueue // link in the owner's ready list
}

var queuePool = sync.Pool{New: func() any { return new(keyQueue) }}

func newKeyQueue(key string, anon bool) *keyQueue {
	q := queuePool.Get().(*keyQueue)
	q.key, q.anon = key, anon
	return q
}

// release returns an empty queue to the pool.
func (q *keyQueue) release() {
	msgs := q.msgs
	msgs.Reset(64)
	*q = keyQueue{msgs: msgs}
	queuePool.Put(q)
}

func (q *keyQueue) push(m *calf.Message) { q.msgs.Push(m) }

func (q *keyQueue) empty() bool { return q.msgs.Empty() }

// next returns the first message, as the handler is to see it, and its
// delivery attempt. The first delivery hands over the group's own copy;
// later ones get a fresh copy, since an earlier handler may still hold the
// previous one.
func (q *keyQueue) next() (*calf.Message, int) {
	m := q.msgs.Front()
	attempt := max(q.track.Attempt, 1)
	if q.tries > 0 {
		m = m.Clone()
	}
	q.tries++
	m.Metadata.Attempt = attempt
	return m, attempt
}

// pop removes the first message.
func (q *keyQueue) pop() {
	q.msgs.Pop()
	q.track, q.tries = delivery.Tracker{}, 0
}

// queueList is a FIFO list of queues linked through nextReady.
type queueList struct{ head, tail *keyQueue }

func (l *queueList) push(q *keyQueue) {
	q.nextReady = nil
	if l.tail == nil {
		l.head = q
	} else {
		l.tail.nextReady = q
	}
	l.tail = q
}

func (l *queueList) pop() *keyQueue {
	q := l.head
	if q == nil {
		return nil
	}
	l.head = q.nextReady
	if l.head == nil {
		l.tail = nil
	}
	q.nextReady = nil
	return q
}
