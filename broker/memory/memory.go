package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// Default values of [Options].
const (
	// DefaultQueueSize is the default bound on a consumer group's
	// unacknowledged messages.
	DefaultQueueSize = 10000
	// DefaultConcurrency is the default bound on the keys one subscription
	// handles at once.
	DefaultConcurrency = 1024
	// DefaultMinBackoff is the default delay before the first redelivery.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is the default cap on the delay before a redelivery.
	DefaultMaxBackoff = 5 * time.Second
)

// routeCacheSize bounds the number of channels whose matching groups a
// broker remembers between changes to its subscriptions.
const routeCacheSize = 4096

// ErrGroupPattern is returned by [Broker.Subscribe] when a consumer group
// already exists with another pattern.
var ErrGroupPattern = errors.New("memory: group subscribed with another pattern")

// Options configures a [Broker]. A nil *Options means the defaults.
type Options struct {
	// MaxAttempts bounds the deliveries of a message before it is parked on
	// [calf.DeadLetterChannel], for subscriptions that do not set
	// [calf.SubscribeOptions.MaxAttempts]. Default: [calf.DefaultMaxAttempts].
	MaxAttempts int
	// Backoff returns the delay before redelivering a message whose
	// delivery number attempt (1 for the first) failed. Default:
	// [calf.ExponentialBackoff] from [DefaultMinBackoff] to [DefaultMaxBackoff].
	Backoff func(attempt int) time.Duration
	// QueueSize bounds the messages a consumer group holds that are not
	// yet acknowledged (queued, being handled or waiting for a
	// redelivery). Publish blocks while a matching group is full.
	// Default: [DefaultQueueSize].
	QueueSize int
	// HeldSize bounds the messages all the consumer groups together hold
	// that are not yet acknowledged. Publish blocks while the broker holds
	// that many, as it does while a matching group is full. Messages that
	// handlers publish count, but their publish never blocks: so a chain of
	// handlers, each publishing to the next group, fed by a burst of
	// publishes from outside holds about HeldSize messages in all, where a
	// bound per group alone would let each group of the chain fill up.
	// Default: QueueSize.
	HeldSize int
	// Concurrency bounds the keys one subscription handles at once, for
	// subscriptions that do not set [calf.SubscribeOptions.Concurrency].
	// Default: [DefaultConcurrency].
	Concurrency int
	// OutageBudget bounds how long a message whose handler fails because a
	// service cannot be reached ([calf.IsUnavailable]) is retried without
	// using up its attempts, for subscriptions that do not set
	// [calf.SubscribeOptions.OutageBudget]. Default:
	// [calf.DefaultOutageBudget]; negative: no budget.
	OutageBudget time.Duration
	// Logger receives the broker's diagnostics: a warning for every parked
	// message, an error for a message that could not be parked. Default:
	// discard.
	Logger *slog.Logger
	// Now returns the current time, used to stamp dead letters.
	// Default: time.Now.
	Now func() time.Time
}

// Stats counts what a [Broker] has done since it was created.
type Stats struct {
	// Published counts the messages Publish accepted, whether or not a
	// subscription matched them, dead letters included.
	Published int64
	// Delivered counts handler invocations, redeliveries included.
	Delivered int64
	// Redelivered counts the handler invocations that were redeliveries.
	Redelivered int64
	// DeadLettered counts the messages parked on [calf.DeadLetterChannel].
	DeadLettered int64
	// Discarded counts the messages dropped unhandled because the last
	// member of their consumer group left.
	Discarded int64
	// OutageRetries counts the failed deliveries retried as outages
	// ([calf.IsUnavailable]), which used up no attempt.
	OutageRetries int64
}

// Broker is an in-process [calf.Broker]; see the package documentation for
// its delivery semantics. It is safe for concurrent use.
type Broker struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex // guards groups, all and subs
	groups map[string]*group
	all    []*group
	subs   map[*subscription]struct{}

	routes atomic.Pointer[routeTable]
	closed atomic.Bool
	done   chan struct{} // closed by Close

	// busy counts unacknowledged messages plus running workers; Drain
	// waits for it to reach zero.
	busy   atomic.Int64
	idleMu sync.Mutex
	idle   chan struct{}

	// held counts the unacknowledged messages of all groups; publishers
	// wait on room while it is at Options.HeldSize (see waitHeld).
	held    atomic.Int64
	waiters atomic.Int64 // publishers in waitHeld
	roomMu  sync.Mutex
	room    chan struct{} // closed when held drops below the bound; nil while no one waits

	published, delivered, redelivered, deadLettered, discarded, outageRetries atomic.Int64
}

var (
	_ calf.Broker         = (*Broker)(nil)
	_ calf.GroupInspector = (*Broker)(nil)
)

// New returns a broker configured by opts.
func New(opts *Options) *Broker {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = calf.DefaultMaxAttempts
	}
	if o.Backoff == nil {
		o.Backoff = calf.ExponentialBackoff(DefaultMinBackoff, DefaultMaxBackoff)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.HeldSize <= 0 {
		o.HeldSize = o.QueueSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	b := &Broker{
		opts:   o,
		log:    o.Logger,
		groups: map[string]*group{},
		subs:   map[*subscription]struct{}{},
		done:   make(chan struct{}),
	}
	b.routes.Store(&routeTable{})
	return b
}

// deliveryKey marks the contexts of this broker's handlers, so that Publish
// recognises a publish made while handling a message.
type deliveryKey struct{}

// Publish delivers a copy of msg to every consumer group whose pattern
// matches its channel. It blocks while one of those groups holds
// [Options.QueueSize] unacknowledged messages, or all groups together
// [Options.HeldSize], until there is room or ctx is done, except when ctx
// is the context of one of this broker's handlers: a publish made while
// handling a message never blocks. It returns [calf.ErrClosed] once the
// broker is closed.
func (b *Broker) Publish(ctx context.Context, msg *calf.Message) error {
	if msg == nil {
		return errors.New("memory: publish nil message")
	}
	if b.closed.Load() {
		return calf.ErrClosed
	}
	if err := calf.ValidateChannel(msg.Channel); err != nil {
		return err
	}
	block := ctx.Value(deliveryKey{}) != b
	groups := b.route(msg.Channel)
	if block && len(groups) > 0 {
		if err := b.waitHeld(ctx); err != nil {
			return err
		}
	}
	switch len(groups) {
	case 0:
	case 1:
		if err := groups[0].publish(ctx, msg, block); err != nil {
			return err
		}
	default:
		if block {
			for _, g := range groups {
				if err := g.waitRoom(ctx); err != nil {
					return err
				}
			}
		}
		// Enqueue everywhere first, then start delivery: see group.enqueue.
		queued := make([]*keyQueue, len(groups))
		var err error
		for i, g := range groups {
			if queued[i], err = g.enqueue(ctx, msg, false); err != nil {
				break
			}
		}
		for i, g := range groups {
			if q := queued[i]; q != nil {
				g.mu.Lock()
				if !g.closed {
					g.schedule(q)
				}
				g.mu.Unlock()
			}
		}
		if err != nil {
			return err
		}
	}
	b.published.Add(1)
	return nil
}

// Subscribe delivers the messages whose channel matches pattern to h, as a
// member of the consumer group opts.Group (a private group when empty). It
// fails with [ErrGroupPattern] when the group exists with another pattern
// and with [calf.ErrClosed] once the broker is closed. ctx supplies the
// values of the handlers' contexts; cancelling it does not end the
// subscription.
func (b *Broker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if err := calf.ValidatePattern(pattern); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("memory: subscribe with nil handler")
	}
	d := delivery.Defaults{Broker: "memory", Log: b.log, MaxAttempts: b.opts.MaxAttempts, Concurrency: b.opts.Concurrency,
		OutageBudget: b.opts.OutageBudget, Backoff: b.opts.Backoff, Now: b.opts.Now}
	o := d.Resolve(opts)

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, calf.ErrClosed
	}
	g := b.groups[o.Group]
	if g != nil && g.pattern != pattern {
		return nil, fmt.Errorf("%w: group %q has pattern %q, not %q", ErrGroupPattern, o.Group, g.pattern, pattern)
	}
	isNew := g == nil
	if isNew {
		g = &group{b: b, name: o.Group, pattern: pattern, keys: map[string]*keyQueue{}}
	}
	sctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), deliveryKey{}, b))
	s := &subscription{
		g:      g,
		ctx:    sctx,
		cancel: cancel,
		run: d.Runner(sctx, o, h, func(dl *calf.Message) error {
			return b.Publish(context.WithValue(context.Background(), deliveryKey{}, b), dl)
		}),
		concurrency: o.Concurrency,
	}
	g.mu.Lock()
	g.members = append(g.members, s)
	g.mu.Unlock()
	if isNew {
		// Publishers route without b.mu: a group becomes visible to them
		// only once it has a member, or a message queued meanwhile would
		// find no one to schedule it, and its key would wait for good.
		if o.Group != "" {
			b.groups[o.Group] = g
		}
		b.all = append(b.all, g)
		b.routes.Store(&routeTable{groups: b.all})
	}
	b.subs[s] = struct{}{}
	return s, nil
}

// GroupMembers returns the number of subscriptions in the consumer
// group named group (0 for a group nobody has joined); it implements
// [calf.GroupInspector].
func (b *Broker) GroupMembers(_ context.Context, group string) (int, error) {
	b.mu.Lock()
	g := b.groups[group]
	b.mu.Unlock()
	if g == nil {
		return 0, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.members), nil
}

// Local reports true: the broker delivers only within this process.
func (b *Broker) Local() bool { return true }

// Close stops every subscription, waits for the handlers in progress and
// discards the messages not yet handled. Publish and Subscribe fail with
// [calf.ErrClosed] afterwards. Close is idempotent. Calling it from a
// handler never returns, since it waits for that handler.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed.Swap(true) {
		b.mu.Unlock()
		return nil
	}
	close(b.done)
	subs := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	for _, s := range subs {
		s.wg.Wait()
	}
	return nil
}

// Drain waits until no message is queued, waiting for a redelivery or being
// handled, including the messages that handlers publish meanwhile. It
// returns ctx's error if ctx ends first. Tests use it to wait for a chain of
// handlers to settle, and a single process to shut down gracefully. Called
// from a handler, it waits for ctx, since that handler's message is not
// yet handled.
func (b *Broker) Drain(ctx context.Context) error {
	for {
		b.idleMu.Lock()
		if b.busy.Load() == 0 {
			b.idleMu.Unlock()
			return nil
		}
		if b.idle == nil {
			b.idle = make(chan struct{})
		}
		idle := b.idle
		b.idleMu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("memory: drain: %w", context.Cause(ctx))
		}
	}
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	return Stats{
		Published:     b.published.Load(),
		Delivered:     b.delivered.Load(),
		Redelivered:   b.redelivered.Load(),
		DeadLettered:  b.deadLettered.Load(),
		Discarded:     b.discarded.Load(),
		OutageRetries: b.outageRetries.Load(),
	}
}

// waitHeld blocks until the groups hold fewer than Options.HeldSize
// unacknowledged messages in all, or the broker closes, or ctx is done.
func (b *Broker) waitHeld(ctx context.Context) error {
	size := int64(b.opts.HeldSize)
	if b.held.Load() < size {
		return nil
	}
	// waiters is raised before held is read again, and release lowers
	// held before it reads waiters: one of the two sees the other.
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	for {
		b.roomMu.Lock()
		if b.held.Load() < size {
			b.roomMu.Unlock()
			return nil
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.roomMu.Unlock()
		select {
		case <-room:
		case <-b.done:
			return calf.ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("memory: publish: the broker holds %d messages: %w", size, ctx.Err())
		}
	}
}

// release removes n messages from the held count and wakes the
// publishers waiting for room.
func (b *Broker) release(n int64) {
	if b.held.Add(-n) >= int64(b.opts.HeldSize) || b.waiters.Load() == 0 {
		return
	}
	b.roomMu.Lock()
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
	b.roomMu.Unlock()
}

// addBusy adjusts the busy count and wakes Drain when it reaches zero.
func (b *Broker) addBusy(n int64) {
	if b.busy.Add(n) != 0 {
		return
	}
	b.idleMu.Lock()
	if b.idle != nil && b.busy.Load() == 0 {
		close(b.idle)
		b.idle = nil
	}
	b.idleMu.Unlock()
}

// routeTable maps channels to the groups whose pattern matches them. A new
// table replaces it whenever a group is created or removed.
type routeTable struct {
	groups []*group
	cache  sync.Map // channel → []*group
	size   atomic.Int32
}

// Subscribed reports whether a message published on channel now would
// reach a subscriber: the broker keeps nothing for a channel nobody
// subscribes to, so that a publisher that can wait (a durable timer)
// holds its message until one does.
func (b *Broker) Subscribed(channel string) bool { return len(b.route(channel)) > 0 }

func (b *Broker) route(channel string) []*group {
	rt := b.routes.Load()
	if v, ok := rt.cache.Load(channel); ok {
		return v.([]*group)
	}
	var gs []*group
	for _, g := range rt.groups {
		if calf.MatchChannel(g.pattern, channel) {
			gs = append(gs, g)
		}
	}
	if rt.size.Load() < routeCacheSize {
		if _, loaded := rt.cache.LoadOrStore(channel, gs); !loaded {
			rt.size.Add(1)
		}
	}
	return gs
}

// removeGroup forgets g. b.mu must be held.
func (b *Broker) removeGroup(g *group) {
	if g.name != "" && b.groups[g.name] == g {
		delete(b.groups, g.name)
	}
	all := make([]*group, 0, len(b.all))
	for _, x := range b.all {
		if x != g {
			all = append(all, x)
		}
	}
	b.all = all
	b.routes.Store(&routeTable{groups: all})
}
