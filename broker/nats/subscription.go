package nats

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// deliverMargin is how many deliveries beyond its MaxAttempts a consumer
// allows, as a safety net for messages the broker failed to park.
const deliverMargin = 5

// pullExpiry is how long a pull request of a subscription waits at the
// server. Older servers may hand a message to a pull request of a member
// that has closed, and redeliver it only after the ack wait: a short
// expiry bounds how long a closed member leaves such requests behind.
const pullExpiry = 5 * time.Second

// Subscribe delivers the messages whose channel matches pattern to h, as a
// member of the consumer group opts.Group (a private group when empty). A
// named group is a set of durable consumers, one per partition, shared by
// every member in every process and resumed where it left off; each
// partition is consumed by one member at a time, which holds a lease on it
// (see the package documentation). A private group's consumers start at
// the messages published after Subscribe returns and are deleted when the
// subscription closes. Subscribe fails with [ErrGroupPattern] when the
// group exists with another pattern and with [calf.ErrClosed] once the
// broker is closed. ctx bounds the setup and supplies the values of the
// handlers' contexts; cancelling it later does not end the subscription.
func (b *Broker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if err := calf.ValidatePattern(pattern); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("nats: subscribe with nil handler")
	}
	d := delivery.Defaults{Broker: "nats", Log: b.log, MaxAttempts: b.opts.MaxAttempts, Concurrency: b.opts.Concurrency,
		OutageBudget: b.opts.OutageBudget, Backoff: b.opts.Backoff, Now: b.opts.Now}
	o := d.Resolve(opts)
	if b.closed.Load() {
		return nil, calf.ErrClosed
	}
	sctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), handlerKey{}, b))
	s := &subscription{
		b:       b,
		pattern: pattern,
		group:   o.Group,
		ctx:     sctx,
		cancel:  cancel,
		run: d.Runner(sctx, o, h, func(dl *calf.Message) error {
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), handlerKey{}, b), b.opts.AckWait)
			defer cancel()
			return b.Publish(ctx, dl)
		}),
		window: b.opts.Window,
		parts:  map[int]*part{},
		beat:   make(chan struct{}),
	}
	s.run.Slots = make(chan struct{}, o.Concurrency)
	if err := s.start(ctx); err != nil {
		_ = s.Close()
		if b.closed.Load() {
			return nil, calf.ErrClosed
		}
		return nil, err
	}
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		_ = s.Close()
		return nil, calf.ErrClosed
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	b.interestChanged()
	return s, nil
}

// subscription is one member of a group: the partitions it consumes now
// (all of them for a private group; those it holds a lease on for a named
// one), each with a lane per key.
type subscription struct {
	b       *Broker
	pattern string
	group   string
	ctx     context.Context
	cancel  context.CancelFunc
	run     delivery.Runner // the handler, the calls at once, retries, parking
	window  int             // messages in progress per partition (MaxAckPending)
	lease   *leaser         // named groups only
	beat    chan struct{}   // closed to stop the heartbeats

	mu        sync.Mutex
	stopped   bool
	parts     map[int]*part
	private   []string       // names of the private group's consumers
	wg        sync.WaitGroup // lanes and heartbeats
	closeOnce sync.Once
}

// part is a partition a member consumes: its consumer and the lanes of
// the keys whose messages it holds.
type part struct {
	s     *subscription
	p     int
	ready chan struct{} // closed once consuming has started, or failed to
	cc    jetstream.ConsumeContext
	mu    sync.Mutex
	gone  bool                   // given up: lanes hand their messages back
	lanes *delivery.Lanes[*item] // by key; the first of each is in progress
	held  map[uint64]*item       // by stream sequence, every message held
	back  map[uint64]bool        // stream sequences handed back, once gone

	// The takeover gate: while gated, deliveries wait in gated until
	// every message the consumer had outstanding when the member took the
	// partition (oldLeft of them, at stream sequences up to oldUpTo) has
	// come back, and are then dispatched in stream order.
	gated   bool
	gatedAt []*item
	oldUpTo uint64
	oldLeft map[uint64]bool // sequences of the old messages seen
	oldN    int
	timer   *time.Timer
}

// item is a delivered message, decoded.
type item struct {
	jm  jetstream.Msg
	seq uint64 // its stream sequence, 0 if unknown
	msg *calf.Message
	err error     // why it does not decode
	at  time.Time // when it came
}

// ConsumerName returns the name of the durable consumer of partition
// partition of the named consumer group group: the group's first 32
// characters with every character but ASCII letters, digits, '-' and '_'
// replaced by '_', then '_', the first 12 hex digits of the SHA-256 of the
// group, '_p' and the partition, as in
// "calf_conv_external_calc-agent_018bd1cfe721_p0". A process in another
// language that consumes a group's messages itself (an external agent of
// package conversation) finds the group's consumers by these names.
func ConsumerName(group string, partition int) string {
	sum := sha256.Sum256([]byte(group))
	var clean strings.Builder
	for _, r := range group {
		if clean.Len() >= 32 {
			break
		}
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			clean.WriteRune(r)
		} else {
			clean.WriteByte('_')
		}
	}
	return clean.String() + "_" + hex.EncodeToString(sum[:6]) + "_p" + strconv.Itoa(partition)
}

// maxDeliver is the consumers' MaxDeliver: a margin over MaxAttempts, or no
// limit for a subscription to the dead-letter channel, whose messages are
// redelivered until they are recorded.
func (s *subscription) maxDeliver() int {
	if s.pattern == calf.DeadLetterChannel {
		return -1
	}
	return s.run.Policy.MaxAttempts + deliverMargin
}

// moreDeliveries reports whether a MaxDeliver of want allows more
// deliveries than have (-1 being no limit).
func moreDeliveries(want, have int) bool {
	if have <= 0 {
		return false
	}
	return want <= 0 || want > have
}

// consumerConfig returns the consumer configuration of partition p of a
// named group, or that of a private group's one consumer.
func (s *subscription) consumerConfig(p int) jetstream.ConsumerConfig {
	b := s.b
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.opts.AckWait,
		MaxDeliver:    s.maxDeliver(),
		FilterSubject: subject(b.opts.Prefix, p, s.pattern),
		MaxAckPending: s.consumerWindow(),
	}
	if s.group == "" {
		// Every partition, in stream order: a key's messages, all in one
		// partition, come in order.
		cfg.FilterSubject = b.opts.Prefix + ".*." + s.pattern
		cfg.Description = "calf private group on " + s.pattern
		cfg.InactiveThreshold = DefaultPrivateInactive
	} else {
		cfg.Durable = ConsumerName(s.group, p)
		cfg.Description = "calf group " + s.group
	}
	return cfg
}

// consumerWindow is the consumers' MaxAckPending: Window for each
// partition of a named group, Partitions × Window for the one consumer of
// a private group.
func (s *subscription) consumerWindow() int {
	if s.group == "" {
		return s.window * s.b.opts.Partitions
	}
	return s.window
}

// start creates or joins the consumers, so that the group exists from
// Subscribe on, and starts consuming. A private group has one consumer,
// over every partition: a consumer takes the server about 5 ms to create
// on file, so that one per partition would delay the first message of a
// new subscriber (a caller's first run) by as many times that. A named
// group has one consumer per partition, whose members consume those they
// get leases on; they are created or joined at once, not one round trip
// after the other.
func (s *subscription) start(ctx context.Context) error {
	b := s.b
	if s.group == "" {
		cons, err := b.js.CreateConsumer(ctx, b.opts.Stream, s.consumerConfig(0))
		if err != nil {
			return fmt.Errorf("nats: create consumer: %w", err)
		}
		s.private = append(s.private, cons.CachedInfo().Name)
		s.wg.Go(s.heartbeats)
		_, err = s.consume(ctx, 0, cons, false)
		return err
	}
	errs := make([]error, b.opts.Partitions)
	var wg sync.WaitGroup
	for p := range b.opts.Partitions {
		wg.Go(func() { _, errs[p] = s.join(ctx, s.consumerConfig(p)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first; the others are most likely the same
		}
	}
	s.wg.Go(s.heartbeats)
	l, err := newLeaser(ctx, s)
	if err != nil {
		return err
	}
	s.lease = l
	// The first tick claims the member's share of the free partitions
	// before Subscribe returns: a member that says it serves (see
	// GroupMembers) consumes, and the runs sent to a worker that has just
	// started do not wait for it to claim its partitions.
	l.tick()
	s.wg.Go(l.run)
	return nil
}

// testHookListed, set by tests, is called once consume has listed a
// partition, before it starts consuming it.
var testHookListed atomic.Pointer[func(*part)]

// consume starts consuming partition p from cons. With old set (a named
// group's partition taken over, cons looked up once its lease was held),
// the messages the consumer had outstanding then, as cons's cached
// information says, are dispatched first, in stream order: see gate. It
// reports false, starting nothing, once the member has stopped.
func (s *subscription) consume(ctx context.Context, p int, cons jetstream.Consumer, old bool) (bool, error) {
	pt := &part{s: s, p: p, ready: make(chan struct{}), held: map[uint64]*item{}}
	pt.lanes = delivery.NewLanes(&pt.mu, s.wg.Go, pt.handleLane, pt.settled)
	// The member may stop, and give the partition up, from the moment it
	// is listed until its consume context exists: stop then waits for it.
	defer close(pt.ready)
	if old {
		info := cons.CachedInfo()
		s.b.log.Debug("nats: partition taken over", "group", s.group, "partition", p, "outstanding", info.NumAckPending, "delivered", info.Delivered.Stream)
		if info.NumAckPending > 0 {
			pt.gated = true
			pt.oldUpTo = info.Delivered.Stream
			pt.oldN = info.NumAckPending
			pt.oldLeft = map[uint64]bool{}
			// Should an old message never come back (acknowledged late by
			// a member that lost its lease), stop waiting after a while.
			pt.timer = time.AfterFunc(gateTimeout(s.b.opts.AckWait), func() {
				pt.mu.Lock()
				defer pt.mu.Unlock()
				if pt.gated {
					s.b.log.Warn("nats: old messages of a partition taken over did not come back", "group", s.group, "partition", p, "missing", pt.oldN-len(pt.oldLeft))
				}
				pt.openGate()
			})
		}
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		if pt.timer != nil {
			pt.timer.Stop()
		}
		return false, nil
	}
	s.parts[p] = pt
	s.mu.Unlock()
	if hook := testHookListed.Load(); hook != nil {
		(*hook)(pt)
	}
	cc, err := cons.Consume(pt.deliver,
		jetstream.PullMaxMessages(s.consumerWindow()),
		jetstream.PullExpiry(pullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if s.ctx.Err() == nil {
				s.b.log.Debug("nats: consume", "group", s.group, "partition", p, "error", err)
			}
		}))
	if err != nil {
		s.mu.Lock()
		delete(s.parts, p)
		s.mu.Unlock()
		if pt.timer != nil {
			pt.timer.Stop()
		}
		return false, fmt.Errorf("nats: consume partition %d: %w", p, err)
	}
	pt.mu.Lock()
	pt.cc = cc
	gone := pt.gone
	pt.mu.Unlock()
	if gone {
		// Given up while consuming started: a consume context left running
		// would take the partition's messages from its next owner.
		cc.Stop()
	}
	return true, nil
}

// stop marks the partition given up, so that its lanes hand their
// messages back instead of handling them, and stops fetching from its
// consumer, so that the messages handed back are not delivered to this
// member again. Messages left in the client's buffer are dropped: they
// come back after the ack wait, and the next owner waits for them (see
// the package documentation). A consume context that is still being
// started stops as soon as it exists (see consume).
func (pt *part) stop() {
	pt.mu.Lock()
	pt.gone = true
	pt.openGate()
	cc := pt.cc
	pt.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// waitStopped waits, for the ack wait at most, until the partition's
// consume context, stopped, no longer receives messages.
func (pt *part) waitStopped() {
	t := time.NewTimer(pt.s.b.opts.AckWait)
	defer t.Stop()
	select {
	case <-pt.ready:
	case <-t.C:
		return
	}
	pt.mu.Lock()
	cc := pt.cc
	pt.mu.Unlock()
	if cc == nil {
		return // consuming never started
	}
	select {
	case <-cc.Closed():
	case <-t.C:
	}
}

// handBack returns it to the server for redelivery at once.
func (pt *part) handBack(it *item) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.handBackLocked(it)
}

// handBackLocked returns it to the server for redelivery at once,
// remembering that this member did, once the partition is given up.
// pt.mu is held.
func (pt *part) handBackLocked(it *item) {
	if pt.gone && it.seq != 0 {
		if pt.back == nil {
			pt.back = map[uint64]bool{}
		}
		pt.back[it.seq] = true
	}
	_ = it.jm.Nak()
}

// giveUp stops consuming partition p, lets the handlers in progress finish
// (their context is cancelled when cancel is set), hands the messages
// waiting in its lanes back to the server at once, in order, and forgets
// the partition. It returns once no lane of it runs.
func (s *subscription) giveUp(p int) {
	s.mu.Lock()
	pt := s.parts[p]
	s.mu.Unlock()
	if pt == nil {
		return
	}
	// The partition stays in s.parts meanwhile, so that the messages it
	// holds keep their heartbeats until they are settled.
	defer func() {
		s.mu.Lock()
		if s.parts[p] == pt {
			delete(s.parts, p)
		}
		s.mu.Unlock()
	}()
	pt.stop()
	pt.waitStopped()
	pt.lanes.Wait()
}

// join returns the durable consumer cfg names, creating it, or raising its
// MaxDeliver to cfg's. It fails with [ErrGroupPattern] when the consumer
// filters another subject.
func (s *subscription) join(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cons, created, err := s.ensure(ctx, cfg)
	if err != nil || created {
		return cons, err
	}
	have := cons.CachedInfo().Config
	raise := moreDeliveries(cfg.MaxDeliver, have.MaxDeliver)
	if !raise && have.AckWait == cfg.AckWait && have.MaxAckPending == cfg.MaxAckPending {
		return cons, nil
	}
	if raise {
		have.MaxDeliver = cfg.MaxDeliver
	}
	have.AckWait = cfg.AckWait
	have.MaxAckPending = cfg.MaxAckPending
	err = settle(ctx, apiAttempt, func(ctx context.Context) error {
		cons, err = s.b.js.UpdateConsumer(ctx, s.b.opts.Stream, have)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nats: update consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
}

// prepare creates the consumer cfg of a named group if it does not exist,
// and checks the pattern of one that does; the server's failures are
// outages (calf.ErrUnavailable).
func (s *subscription) prepare(ctx context.Context, cfg jetstream.ConsumerConfig) error {
	_, _, err := s.ensure(ctx, cfg)
	if err != nil && !errors.Is(err, ErrGroupPattern) {
		return calf.Unavailable(err)
	}
	return err
}

// ensure returns the consumer cfg of a named group, creating it if it
// does not exist (created), and fails with ErrGroupPattern when it exists
// with another pattern. On a cluster, a request about a consumer that
// another process is creating may go unanswered: each attempt is bounded
// and made again (see settle), as it is when another member created the
// consumer meanwhile.
func (s *subscription) ensure(ctx context.Context, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, created bool, err error) {
	err = settle(ctx, apiAttempt, func(ctx context.Context) error {
		cons, created, err = s.ensureOnce(ctx, cfg)
		return err
	})
	return cons, created, err
}

func (s *subscription) ensureOnce(ctx context.Context, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, created bool, err error) {
	b := s.b
	cons, err = b.js.Consumer(ctx, b.opts.Stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons, err = b.js.CreateConsumer(ctx, b.opts.Stream, cfg)
		if err != nil {
			return nil, false, fmt.Errorf("nats: create consumer %s: %w", cfg.Durable, err)
		}
		return cons, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("nats: consumer %s: %w", cfg.Durable, err)
	}
	if have := cons.CachedInfo().Config.FilterSubject; have != cfg.FilterSubject {
		pattern := strings.SplitN(have, ".", 3)
		return nil, false, fmt.Errorf("%w: group %q has pattern %q", ErrGroupPattern, s.group, pattern[len(pattern)-1])
	}
	return cons, false, nil
}

// Close stops fetching messages, cancels the handlers' context and waits
// for the handlers in progress. A message whose handler failed because of
// the close, and the messages waiting behind it, are handed back at once
// for another member of the group, which takes the partition over once
// this member's lease is gone. The consumers of a private group are
// deleted; those of a named group stay, holding its messages for its other
// and future members.
func (s *subscription) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		parts := make([]int, 0, len(s.parts))
		pts := make([]*part, 0, len(s.parts))
		for p, pt := range s.parts {
			parts = append(parts, p)
			pts = append(pts, pt)
		}
		s.mu.Unlock()
		if s.lease != nil {
			s.lease.stop()
		}
		// Give every partition up before the handlers refuse their
		// messages, so that those are not handled here again, out of order.
		// The parts are those listed above: a partition whose lease was
		// lost meanwhile may have left s.parts.
		for _, pt := range pts {
			pt.stop()
		}
		for _, pt := range pts {
			pt.waitStopped()
		}
		s.cancel()
		for _, p := range parts {
			s.giveUp(p)
		}
		if s.lease != nil {
			s.lease.wait()
			s.lease.releaseAll()
		}
		close(s.beat)
		s.wg.Wait()
		b := s.b
		if len(s.private) > 0 && !b.nc.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			for _, name := range s.private {
				if err := b.js.DeleteConsumer(ctx, b.opts.Stream, name); err != nil {
					b.log.Debug("nats: delete private consumer", "consumer", name, "error", err)
				}
			}
			cancel()
		}
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	})
	return nil
}

// deliver takes a message of the partition into the lane of its key,
// starting the lane if it is idle. A message the member holds already (a
// redelivery of one in progress) is dropped: the one held settles it.
func (pt *part) deliver(jm jetstream.Msg) {
	b := pt.s.b
	it := &item{jm: jm, at: time.Now()}
	if md, err := jm.Metadata(); err == nil {
		it.seq = md.Sequence.Stream
	}
	msgID := jm.Headers().Get(jetstream.MsgIDHeader)
	it.msg, it.err = decode(b.opts.Prefix, jm.Subject(), msgID, jm.Data())
	if it.err != nil {
		it.msg = rawMessage(b.opts.Prefix, jm.Subject(), msgID, jm.Data())
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.gone {
		// Given up (the subscription closes, or the partition moved): no
		// lane starts any more, and the server redelivers the message to
		// the partition's next owner. Handed back once only: should this
		// member's consumption still be running, the message would come
		// back here at once, and each round would count as a delivery
		// until the consumer's limit drops it. Left unsettled, it comes
		// back after the ack wait, and the next owner waits for it.
		if it.seq == 0 || pt.back[it.seq] {
			b.log.Debug("nats: a message came back to a partition given up", "group", pt.s.group, "partition", pt.p, "seq", it.seq)
			return
		}
		pt.handBackLocked(it)
		return
	}
	if it.seq != 0 {
		if _, ok := pt.held[it.seq]; ok {
			return
		}
		pt.held[it.seq] = it
	}
	if pt.gated {
		pt.gatedAt = append(pt.gatedAt, it)
		if it.seq != 0 && it.seq <= pt.oldUpTo {
			pt.oldLeft[it.seq] = true
		}
		if len(pt.oldLeft) >= pt.oldN {
			pt.openGate()
		}
		return
	}
	pt.dispatch(it)
}

// gateTimeout is how long a member that took a partition over waits for
// the messages the consumer had outstanding to come back: the ack wait
// after which the server redelivers them, twice, and a margin.
func gateTimeout(ackWait time.Duration) time.Duration {
	return 2*ackWait + time.Second
}

// openGate dispatches the deliveries held at the takeover gate in stream
// order and lets the next ones through. pt.mu is held.
func (pt *part) openGate() {
	if !pt.gated {
		return
	}
	pt.gated = false
	if pt.timer != nil {
		pt.timer.Stop()
	}
	slices.SortFunc(pt.gatedAt, func(a, b *item) int { return cmp.Compare(a.seq, b.seq) })
	for _, it := range pt.gatedAt {
		pt.dispatch(it)
	}
	pt.gatedAt = nil
}

// dispatch appends it to the lane of its key, starting the lane if it is
// idle; once the partition is given up the lane hands it back, in order.
// pt.mu is held.
func (pt *part) dispatch(it *item) {
	key := it.msg.Key
	if key == "" || it.err != nil {
		key = delivery.SoloKey(it.seq) // ordered with nothing
	}
	pt.lanes.Push(key, it)
}

// handleLane handles the message at the head of its key's lane; once the
// partition is given up, or the member halted, it hands it back instead,
// in order: the next owner gets the lane's messages in turn.
func (pt *part) handleLane(it *item) bool {
	pt.mu.Lock()
	if pt.gone || pt.s.halted() {
		pt.handBackLocked(it)
		pt.mu.Unlock()
		return true
	}
	pt.mu.Unlock()
	pt.handle(it)
	return true
}

// settled forgets it, which its lane is done with. pt.mu is held.
func (pt *part) settled(it *item) { delete(pt.held, it.seq) }

// heartbeats tells the server every quarter of the ack wait that every
// message a lane holds, in progress or waiting its turn, is being worked
// on, once it has been held for half a quarter: two heartbeats may go
// missing (a busy machine, a slow network) before the server redelivers
// a message to another member, and a message settled within an eighth of
// the ack wait (most are) costs none.
func (s *subscription) heartbeats() {
	every := s.b.opts.AckWait / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.beat:
			return
		}
		s.mu.Lock()
		parts := make([]*part, 0, len(s.parts))
		for _, pt := range s.parts {
			parts = append(parts, pt)
		}
		s.mu.Unlock()
		// A message that came less than half a period ago is left for
		// the next beat, which still comes well within its ack wait (at
		// most 1.5 periods after it came, the ack wait being 4): most
		// messages are settled before they need a beat at all.
		young := time.Now().Add(-every / 2)
		for _, pt := range parts {
			pt.mu.Lock()
			msgs := make([]jetstream.Msg, 0, len(pt.held))
			for _, it := range pt.held {
				if it.at.Before(young) {
					msgs = append(msgs, it.jm)
				}
			}
			pt.mu.Unlock()
			for _, jm := range msgs {
				_ = jm.InProgress()
			}
		}
	}
}

// handle calls the handler with it until it succeeds, retrying in place
// after a backoff (the later messages of the key wait), or parks it after
// its last attempt. A message left unsettled because the member stopped
// goes back to the server at once.
func (pt *part) handle(it *item) {
	s := pt.s
	jm, msg := it.jm, it.msg
	delivered := 1
	if md, err := jm.Metadata(); err == nil {
		delivered = int(md.NumDelivered)
	}
	if it.err != nil {
		pt.park(it, calf.Permanent(it.err), delivered)
		return
	}
	if max := s.run.Policy.MaxAttempts; delivered > max && delivery.Parkable(msg) {
		// Deliveries ended without an outcome, by crashes or a shorter
		// MaxAttempts of another member.
		pt.park(it, fmt.Errorf("nats: delivered %d times, over the limit of %d", delivered, max), delivered)
		return
	}
	switch s.run.Deliver(msg, delivery.NewTracker(delivered), pt.stopping()) {
	case delivery.Handled:
		_ = jm.Ack()
	case delivery.Parked:
		_ = jm.Term()
	default:
		pt.handBack(it) // interrupted by Close: hand it back at once
	}
}

// park parks it, which failed its last attempt with err, and terminates
// its delivery. Should parking fail, it tries again after a backoff,
// holding the key's later messages back, until the member stops or gives
// the partition up: then it hands it back.
func (pt *part) park(it *item, err error, attempt int) {
	if pt.s.run.ParkRetried(it.msg, err, attempt, pt.stopping()) {
		_ = it.jm.Term()
		return
	}
	pt.handBack(it)
}

// stopping tells a delivery of the partition when to stop: the waits end
// when the member closes; a failure while it halts is handed back; a
// parking that fails is given up once the partition is, too.
func (pt *part) stopping() delivery.Stop {
	s := pt.s
	return delivery.Stop{
		C:      s.ctx.Done(),
		Halted: s.halted,
		GiveUp: func() bool {
			pt.mu.Lock()
			gone := pt.gone
			pt.mu.Unlock()
			return gone || s.halted()
		},
	}
}

// halted reports whether the member must stop handling messages: it is
// closing, or its broker is closed or has lost its connection for good.
func (s *subscription) halted() bool {
	return s.ctx.Err() != nil || s.b.closed.Load() || s.b.nc.IsClosed()
}
