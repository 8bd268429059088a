package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// group is a consumer group: the members that share a pattern's messages,
// and the queues of those messages by key.
type group struct {
	b       *Broker
	name    string // empty for a private group
	pattern string

	mu      sync.Mutex
	members []*subscription
	next    int                  // round-robin cursor over members
	keys    map[string]*keyQueue // queues of keyed messages, present while non-empty
	peak    int                  // the most keys held since keys was made (see shrinkKeys)
	pending int                  // unacknowledged messages
	active  int                  // running workers of all members
	space   chan struct{}        // closed when pending drops below the queue size
	closed  bool                 // the last member left: accept nothing more
}

func (g *group) String() string {
	if g.name == "" {
		return "private group on " + g.pattern
	}
	return "group " + g.name
}

func (g *group) fullError(ctx context.Context) error {
	return fmt.Errorf("memory: publish: %s is full: %w", g, ctx.Err())
}

// waitRoom blocks until g holds fewer than the queue size of
// unacknowledged messages, or is closed.
func (g *group) waitRoom(ctx context.Context) error {
	size := g.b.opts.QueueSize
	g.mu.Lock()
	for !g.closed && g.pending >= size {
		if err := g.waitSpace(ctx); err != nil {
			g.mu.Unlock()
			return err
		}
	}
	g.mu.Unlock()
	return nil
}

// waitSpace waits for the next acknowledgement. g.mu must be held; it is
// released while waiting.
func (g *group) waitSpace(ctx context.Context) error {
	if g.space == nil {
		g.space = make(chan struct{})
	}
	space := g.space
	g.mu.Unlock()
	defer g.mu.Lock()
	select {
	case <-space:
		return nil
	case <-g.b.done:
		return calf.ErrClosed
	case <-ctx.Done():
		return g.fullError(ctx)
	}
}

// publish queues a copy of msg, first waiting for room if block is set.
func (g *group) publish(ctx context.Context, msg *calf.Message, block bool) error {
	q, err := g.enqueue(ctx, msg, block)
	if q != nil {
		g.mu.Lock()
		if !g.closed {
			g.schedule(q)
		}
		g.mu.Unlock()
	}
	return err
}

// enqueue queues msg and returns the key queue it created, which the caller
// must schedule. Publish enqueues a message in every group before it
// schedules any, so that a handler in one group cannot emit a consequence
// that reaches another group before the message itself does.
func (g *group) enqueue(ctx context.Context, msg *calf.Message, block bool) (*keyQueue, error) {
	m := msg.Clone()
	m.Metadata.Attempt = 0
	size := g.b.opts.QueueSize
	g.mu.Lock()
	defer g.mu.Unlock()
	for block && !g.closed && g.pending >= size {
		if err := g.waitSpace(ctx); err != nil {
			return nil, err
		}
	}
	if g.closed {
		return nil, nil
	}
	g.pending++
	g.b.held.Add(1)
	g.b.addBusy(1)
	if m.Key == "" {
		q := newKeyQueue("", true)
		q.push(m)
		return q, nil
	}
	if q := g.keys[m.Key]; q != nil {
		q.push(m)
		return nil, nil
	}
	q := newKeyQueue(m.Key, false)
	q.push(m)
	g.keys[m.Key] = q
	g.peak = max(g.peak, len(g.keys))
	return q, nil
}

// shrinkAt is the number of keys from which a group's map of queues is
// made again once most of them are gone.
const shrinkAt = 4096

// shrinkKeys makes the map of queues again when it holds an eighth of
// the most keys it held: a Go map keeps the room of its peak, and a
// burst of runs (each its own key) would leave that room held for good.
// g.mu must be held.
func (g *group) shrinkKeys() {
	if g.peak < shrinkAt || len(g.keys) > g.peak/8 {
		return
	}
	keys := make(map[string]*keyQueue, len(g.keys))
	for k, q := range g.keys {
		keys[k] = q
	}
	g.keys, g.peak = keys, len(keys)
}

// schedule hands q to its owner, or to a new owner if it has none or its
// owner left: to a new worker if the owner has a free slot, or else to the
// owner's ready list. g.mu must be held.
func (g *group) schedule(q *keyQueue) {
	s := q.owner
	if s == nil || s.stopped {
		if len(g.members) == 0 {
			q.owner = nil
			return // the group is closing; its messages are discarded
		}
		g.next++
		s = g.members[g.next%len(g.members)]
		q.owner = s
	}
	if s.active >= s.concurrency {
		s.ready.push(q)
		return
	}
	s.active++
	g.active++
	g.b.addBusy(1)
	if n := len(s.idle); n > 0 {
		// A worker that finished recently waits for work: hand q to it
		// (the channel has room for one), sparing a goroutine start and
		// the growth of a fresh stack.
		w := s.idle[n-1]
		s.idle = s.idle[:n-1]
		w <- q
		return
	}
	s.wg.Add(1)
	go s.work(q)
}

// ack removes one message from the unacknowledged count. g.mu must be held.
func (g *group) ack() {
	g.pending--
	g.b.release(1)
	g.b.addBusy(-1)
	if g.space != nil && g.pending < g.b.opts.QueueSize {
		close(g.space)
		g.space = nil
	}
}

// discard drops the messages of a closed group once no worker runs. g.mu
// must be held.
func (g *group) discard() {
	if !g.closed || g.active > 0 || g.keys == nil {
		return
	}
	if n := int64(g.pending); n > 0 {
		g.b.discarded.Add(n)
		g.b.release(n)
		g.b.addBusy(-n)
		g.b.log.Debug("memory: discarded the undelivered messages of a group with no members", "group", g.name, "pattern", g.pattern, "messages", n)
	}
	g.pending = 0
	g.keys = nil
	if g.space != nil {
		close(g.space)
		g.space = nil
	}
}

// subscription is one member of a group.
type subscription struct {
	g           *group
	ctx         context.Context
	cancel      context.CancelFunc
	run         delivery.Runner // the handler, the retry policy, parking
	concurrency int
	wg          sync.WaitGroup // running workers

	// Guarded by g.mu.
	active  int              // running workers
	ready   queueList        // queues waiting for a free worker slot
	idle    []chan *keyQueue // workers waiting for work, most recent last
	stopped bool
}

// idleWorkerTimeout is how long a worker with nothing to do waits for more
// work before its goroutine ends.
const idleWorkerTimeout = time.Second

// Close stops delivery to this member, cancels its handlers' context and
// waits for the handlers in progress to return. The keys it held move to
// the other members of its group; when it was the last member, the group's
// unhandled messages are discarded. Calling Close from the subscription's
// own handler never returns.
func (s *subscription) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// stop removes s from its group and cancels its context.
func (s *subscription) stop() {
	g, b := s.g, s.g.b
	b.mu.Lock()
	g.mu.Lock()
	if s.stopped {
		g.mu.Unlock()
		b.mu.Unlock()
		return
	}
	s.stopped = true
	delete(b.subs, s)
	for i, m := range g.members {
		if m == s {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	if len(g.members) == 0 {
		g.closed = true
		b.removeGroup(g)
	}
	for _, w := range s.idle {
		w <- nil
	}
	s.idle = nil
	for q := s.ready.pop(); q != nil; q = s.ready.pop() {
		q.owner = nil
		if !g.closed {
			g.schedule(q)
		}
	}
	g.discard()
	g.mu.Unlock()
	b.mu.Unlock()
	s.cancel()
}

// work handles the messages of q, and then of the queues waiting in s's
// ready list, until there is nothing left for it to do; then it waits a
// while for more work before it ends.
func (s *subscription) work(q *keyQueue) {
	defer s.wg.Done()
	var wake chan *keyQueue
	var timer *time.Timer
	for q != nil {
		s.drainQueues(q)
		g := s.g
		g.mu.Lock()
		if s.stopped {
			g.mu.Unlock()
			return
		}
		if wake == nil {
			wake = make(chan *keyQueue, 1)
			timer = time.NewTimer(idleWorkerTimeout)
		} else {
			timer.Reset(idleWorkerTimeout)
		}
		s.idle = append(s.idle, wake)
		g.mu.Unlock()
		select {
		case q = <-wake:
			timer.Stop()
		case <-timer.C:
			g.mu.Lock()
			if i := slices.Index(s.idle, wake); i >= 0 {
				s.idle = slices.Delete(s.idle, i, i+1)
				q = nil
			} else {
				// Handed work (or told to stop) just as the time ran out.
				q = <-wake
			}
			g.mu.Unlock()
		}
	}
}

// drainQueues is one stretch of work: the messages of q, and then of the
// queues waiting in s's ready list, until there is nothing left.
func (s *subscription) drainQueues(q *keyQueue) {
	g, b := s.g, s.g.b
	g.mu.Lock()
	msg, attempt := q.next()
	g.mu.Unlock()
	for {
		b.delivered.Add(1)
		if attempt > 1 {
			b.redelivered.Add(1)
		}
		err := s.run.Call(msg)
		var parked bool
		var backoff time.Duration
		if err != nil && s.ctx.Err() == nil {
			// The worker holds q: no one else reads or changes its tracker.
			v := s.run.Failed(&q.track, msg, err)
			if v.Park {
				if s.run.Park(msg, err, attempt) && delivery.Parkable(msg) {
					b.deadLettered.Add(1)
				}
				parked = true
			} else {
				backoff = v.Wait
				if v.Outage {
					b.outageRetries.Add(1)
				}
			}
		}
		g.mu.Lock()
		q = s.settle(q, err, parked, backoff)
		if q == nil {
			s.active--
			g.active--
			g.discard()
			g.mu.Unlock()
			b.addBusy(-1)
			return
		}
		msg, attempt = q.next()
		g.mu.Unlock()
	}
}

// settle records the outcome of delivering q's first message and returns
// the queue the worker handles next, or nil. g.mu must be held.
func (s *subscription) settle(q *keyQueue, err error, parked bool, backoff time.Duration) *keyQueue {
	g := s.g
	switch {
	case err == nil || parked:
		q.pop()
		g.ack()
	case s.ctx.Err() != nil:
		// Interrupted by Close: the message stays unacknowledged, for
		// another member.
	default:
		held := q
		time.AfterFunc(backoff, func() {
			g.mu.Lock()
			if !g.closed {
				g.schedule(held)
			}
			g.mu.Unlock()
		})
		q = nil
	}
	if q != nil && q.empty() {
		if !q.anon {
			delete(g.keys, q.key)
			g.shrinkKeys()
		}
		q.release()
		q = nil
	}
	if s.stopped {
		if q != nil && !g.closed {
			q.owner = nil
			g.schedule(q)
		}
		return nil
	}
	if q != nil {
		if s.ready.head == nil {
			return q
		}
		// Others are waiting for a slot: take turns.
		s.ready.push(q)
	}
	return s.ready.pop()
}
