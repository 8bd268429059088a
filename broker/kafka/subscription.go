package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// pollRecords bounds the records one poll takes.
const pollRecords = 1000

// fetchMaxWait is how long the cluster holds a fetch that finds no
// records. A partition a subscription starts consuming waits for the fetch
// in flight, so it bounds how soon a new topic's messages arrive; an idle
// subscription sends a fetch this often.
const fetchMaxWait = 250 * time.Millisecond

// Subscribe delivers the messages whose channel matches pattern to h, as a
// member of the Kafka consumer group opts.Group. A pattern without
// wildcards consumes the topic of its channel, which Subscribe creates if
// it does not exist; a pattern with wildcards consumes every topic that
// may carry a matching channel, including the topics created later. A
// group Kafka does not know yet starts at the end of the topics that
// exist, so that it receives the messages published after Subscribe
// returns; a group that has committed offsets resumes from them. With the
// empty group the subscription joins no Kafka group: it consumes every
// partition of its topics, from their end at Subscribe.
// Subscribe fails with [calf.ErrClosed] once the broker is closed. ctx
// bounds the setup and supplies the values of the handlers' contexts;
// cancelling it later does not end the subscription.
func (b *Broker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	topics, err := matcher(b.opts.TopicPrefix, pattern)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("kafka: subscribe with nil handler")
	}
	d := delivery.Defaults{Broker: "kafka", Log: b.log, MaxAttempts: b.opts.MaxAttempts, Concurrency: b.opts.Concurrency,
		OutageBudget: b.opts.OutageBudget, Backoff: b.opts.Backoff, Now: b.opts.Now}
	o := d.Resolve(opts)
	if b.closed.Load() {
		return nil, calf.ErrClosed
	}
	group, private := o.Group, o.Group == ""
	sctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), handlerKey{}, b))
	s := &subscription{
		b:       b,
		pattern: pattern,
		topics:  topics,
		group:   group,
		private: private,
		ctx:     sctx,
		cancel:  cancel,
		run: d.Runner(sctx, o, h, func(dl *calf.Message) error {
			ctx, cancel := context.WithTimeout(sctx, b.opts.RebalanceTimeout)
			defer cancel()
			return b.Publish(ctx, dl)
		}),
		workers:       map[partition]*worker{},
		known:         map[partition]bool{},
		pendingTopics: map[string]bool{},
		wake:          make(chan struct{}, 1),
		done:          make(chan struct{}),
	}
	s.run.Slots = make(chan struct{}, o.Concurrency)
	if err := s.start(ctx); err != nil {
		cancel()
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
	return s, nil
}

// partition is a topic partition.
type partition struct {
	topic string
	part  int32
}

// subscription is one member of a consumer group: a franz-go group
// client, and a worker per assigned partition that handles its records by
// key: one at a time and in offset order for each key, keys in parallel.
type subscription struct {
	b       *Broker
	pattern string
	topics  topicMatcher
	group   string
	private bool
	ctx     context.Context // the handlers' context
	cancel  context.CancelFunc
	run     delivery.Runner // the handler, the messages handled at once, retries, parking
	cl      *kgo.Client

	mu      sync.Mutex
	workers map[partition]*worker
	stopped bool

	// A private subscription consumes partitions directly, without a
	// group: it finds the topics of its pattern itself.
	known         map[partition]bool // the partitions consumed
	pendingTopics map[string]bool    // created here, not listed yet
	wake          chan struct{}      // a matching topic was created here
	discovering   sync.WaitGroup

	crashed   atomic.Bool
	done      chan struct{} // closed when the poll loop ends
	closeOnce sync.Once
}

// start positions a new group, and starts the group client and its poll
// loop.
func (s *subscription) start(ctx context.Context) error {
	b := s.b
	if s.topics.re == nil {
		if err := b.ensureTopic(ctx, s.topics.topic); err != nil {
			return err
		}
	}
	if s.private {
		return s.startDirect(ctx)
	}
	b.live.start(ctx)
	if err := s.position(ctx); err != nil {
		return err
	}
	copts := append(s.clientOptions(),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topics.expr()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(b.opts.SessionTimeout),
		kgo.HeartbeatInterval(b.opts.HeartbeatInterval),
		kgo.RebalanceTimeout(b.opts.RebalanceTimeout),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(b.opts.CommitInterval),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	)
	if s.topics.re != nil {
		copts = append(copts, kgo.ConsumeRegex())
	}
	cl, err := kgo.NewClient(append(copts, b.opts.ClientOptions...)...)
	if err != nil {
		return fmt.Errorf("kafka: group %s: client: %w", s.group, err)
	}
	s.cl = cl
	go s.poll()
	return nil
}

// clientOptions returns the options of a subscription's client common to
// group and direct consumers.
func (s *subscription) clientOptions() []kgo.Opt {
	b := s.b
	return []kgo.Opt{
		kgo.SeedBrokers(b.seeds...),
		kgo.ClientID("calf"),
		kgo.MetadataMaxAge(b.opts.MetadataMaxAge),
		kgo.MetadataMinAge(min(b.opts.MetadataMaxAge, time.Second)),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.WithLogger(kgoLogger{b.log}),
	}
}

// position commits, for a group that has no committed offsets, the end
// offsets of the existing topics of the pattern, so that the group starts
// with the messages published after Subscribe returns. Topics created
// later are consumed from their start. A group that has committed offsets
// keeps them.
func (s *subscription) position(ctx context.Context) error {
	adm := s.b.adm
	if have, err := s.hasOffsets(ctx); have || err != nil {
		return err
	}
	topics, err := s.matchingTopics(ctx)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: group %s: list end offsets: %w", s.group, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("kafka: group %s: list end offsets: %w", s.group, err)
	}
	offsets := ends.Offsets()
	offsets.Each(func(o kadm.Offset) {
		o.LeaderEpoch = -1
		offsets.Add(o)
	})
	// Another member that subscribed meanwhile may have positioned the
	// group, and handled messages after the end offsets it read: look
	// again, so as not to move the group past them.
	if have, err := s.hasOffsets(ctx); have || err != nil {
		return err
	}
	resp, err := adm.CommitOffsets(ctx, s.group, offsets)
	if err == nil {
		err = resp.Error()
	}
	switch {
	case err == nil:
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
		// Another member runs the group already: it has its position.
	default:
		return fmt.Errorf("kafka: group %s: commit start offsets: %w", s.group, err)
	}
	return nil
}

// hasOffsets reports whether the group has committed offsets.
func (s *subscription) hasOffsets(ctx context.Context) (bool, error) {
	committed, err := s.b.adm.FetchOffsets(ctx, s.group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return false, fmt.Errorf("kafka: group %s: fetch offsets: %w", s.group, err)
	}
	have := false
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			have = true
		}
	})
	return have, nil
}

// poll fetches records and hands each partition's to its worker.
func (s *subscription) poll() {
	defer close(s.done)
	for {
		fs := s.cl.PollRecords(s.ctx, pollRecords)
		if s.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				s.b.log.Debug("kafka: fetch", "group", s.group, "topic", topic, "partition", p, "error", err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			s.mu.Lock()
			w := s.workers[partition{p.Topic, p.Partition}]
			s.mu.Unlock()
			if w != nil {
				w.push(p.Records)
			}
		})
	}
}

// assigned starts a worker for each partition the group assigned to the
// member.
func (s *subscription) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	// The member may have a new member id: tell the peers at once.
	s.b.live.poke()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	for topic, parts := range assigned {
		for _, p := range parts {
			tp := partition{topic, p}
			if s.workers[tp] != nil {
				continue
			}
			w := newWorker(s, tp)
			s.workers[tp] = w
			go w.run()
		}
	}
}

// revoked stops the workers of the partitions taken from the member, waits
// for their handlers, and commits what they handled, so that the member
// that gets them next starts where they stopped.
func (s *subscription) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	ws := s.remove(revoked)
	if s.crashed.Load() {
		return
	}
	for _, w := range ws {
		<-w.done
	}
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		s.b.log.Warn("kafka: commit on revoke", "group", s.group, "error", err)
	}
}

// lost stops the workers of the partitions the member lost without a
// chance to commit.
func (s *subscription) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	for _, w := range s.remove(lost) {
		if !s.crashed.Load() {
			<-w.done
		}
	}
}

// remove stops and forgets the workers of the given partitions, and
// returns them.
func (s *subscription) remove(parts map[string][]int32) []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []*worker
	for topic, ps := range parts {
		for _, p := range ps {
			tp := partition{topic, p}
			if w := s.workers[tp]; w != nil {
				delete(s.workers, tp)
				w.stop()
				ws = append(ws, w)
			}
		}
	}
	return ws
}

// stopAll stops and forgets every worker, and returns them.
func (s *subscription) stopAll() []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	ws := make([]*worker, 0, len(s.workers))
	for tp, w := range s.workers {
		delete(s.workers, tp)
		w.stop()
		ws = append(ws, w)
	}
	return ws
}

// Close stops fetching, cancels the handlers' context, waits for the
// handlers in progress, commits the offsets they handled and leaves the
// group, whose other members get its partitions. A message whose handler
// fails because of the close is not committed: the next owner of its
// partition handles it.
func (s *subscription) Close() error {
	var err error
	s.closeOnce.Do(func() {
		ws := s.stopAll()
		s.cancel()
		for _, w := range ws {
			<-w.done
		}
		<-s.done
		s.discovering.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.RebalanceTimeout)
		defer cancel()
		if cerr := s.cl.CommitMarkedOffsets(ctx); cerr != nil && !errors.Is(cerr, kgo.ErrClientClosed) {
			err = fmt.Errorf("kafka: group %s: commit: %w", s.group, cerr)
		}
		s.cl.Close()
		s.b.mu.Lock()
		delete(s.b.subs, s)
		s.b.mu.Unlock()
	})
	return err
}

// crash stops the subscription without waiting for its handlers and
// without committing.
func (s *subscription) crash() {
	s.closeOnce.Do(func() {
		s.crashed.Store(true)
		s.stopAll()
		s.cl.Close()
		s.cancel()
	})
}

// worker handles the records of one partition. Its dispatcher takes them
// in offset order and hands each to the lane of its key: a lane handles
// its records one at a time, in order, and lanes run in parallel, so a
// slow record holds up only the later records of its key. The offsets
// committed are those below the lowest record not yet settled, so that
// the next owner of the partition starts with it; records after it that
// were settled are then handled again, in order.
type worker struct {
	s      *subscription
	tp     partition
	stopCh chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	queue  []*kgo.Record
	paused bool
	closed bool // stopped: pushes are dropped
	notify chan struct{}

	// The dispatcher's and the lanes' state, under lmu.
	lmu     sync.Mutex
	lanes   *delivery.Lanes[*slot] // by key, while they have records
	pending []*slot                // dispatched records not yet committable, in offset order
	next    int64                  // the offset after the last record dispatched; -1 before the first
	room    chan struct{}          // signalled when a record is settled
	seen    *window                // the ids settled recently
}

// slot is a dispatched record and whether it is settled.
type slot struct {
	r       *kgo.Record
	settled bool
}

func newWorker(s *subscription, tp partition) *worker {
	w := &worker{
		s: s, tp: tp, stopCh: make(chan struct{}), done: make(chan struct{}), notify: make(chan struct{}, 1), next: -1,
		room: make(chan struct{}, 1),
		seen: newWindow(s.b.opts.DuplicateWindow, s.b.opts.Now),
	}
	w.lanes = delivery.NewLanes(&w.lmu, nil, w.handleLane, w.settled)
	return w
}

// push queues records, pausing the partition's fetching once the queue is
// full.
func (w *worker) push(rs []*kgo.Record) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, rs...)
	full := len(w.queue) >= w.s.b.opts.QueueSize && !w.paused
	if full {
		w.paused = true
	}
	w.mu.Unlock()
	if full {
		w.s.cl.PauseFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.part}})
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// pop returns the next queued record, waiting for one; it returns nil
// once the worker is stopped.
func (w *worker) pop() *kgo.Record {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			r := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			resume := w.paused && len(w.queue) == 0
			if resume {
				w.paused = false
			}
			w.mu.Unlock()
			if resume {
				w.s.cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.part}})
			}
			return r
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-w.stopCh:
			return nil
		}
	}
}

// stop stops the worker, dropping its queue. A partition it paused is
// resumed, so that it is fetched again should it come back to this
// member.
func (w *worker) stop() {
	close(w.stopCh)
	w.mu.Lock()
	paused := w.paused
	w.paused, w.queue, w.closed = false, nil, true
	w.mu.Unlock()
	if paused && w.s.cl != nil {
		w.s.cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.part}})
	}
}

func (w *worker) stopped() bool {
	select {
	case <-w.stopCh:
		return true
	default:
		return false
	}
}

// run dispatches the partition's records to their lanes until the
// worker is stopped, and then waits for the lanes.
func (w *worker) run() {
	defer close(w.done)
	defer w.lanes.Wait()
	for {
		r := w.pop()
		if r == nil || w.stopped() {
			return
		}
		if !w.dispatch(r) {
			return
		}
	}
}

// dispatch hands r to the lane of its key, starting the lane if it is
// idle, once fewer than QueueSize records of the partition are unsettled.
// It reports false when the worker stopped first.
func (w *worker) dispatch(r *kgo.Record) bool {
	for {
		w.lmu.Lock()
		if r.Offset < w.next {
			w.lmu.Unlock()
			return true // fetched again after a rebalance: dispatched already
		}
		if len(w.pending) < w.s.b.opts.QueueSize {
			break
		}
		w.lmu.Unlock()
		select {
		case <-w.room:
		case <-w.stopCh:
			return false
		}
	}
	defer w.lmu.Unlock()
	w.next = r.Offset + 1
	sl := &slot{r: r}
	w.pending = append(w.pending, sl)
	key := string(r.Key)
	if key == "" {
		// A record without a key is ordered with nothing.
		key = delivery.SoloKey(uint64(r.Offset))
	}
	w.lanes.Push(key, sl)
	return true
}

// handleLane handles the record at the head of its key's lane. It
// reports false, leaving the lane's records to the next owner, once the
// worker is stopped.
func (w *worker) handleLane(sl *slot) bool {
	return !w.stopped() && w.handle(sl.r)
}

// settled marks sl settled, and marks for commit the offsets below the
// lowest record not settled. w.lmu must be held.
func (w *worker) settled(sl *slot) {
	sl.settled = true
	n := 0
	for n < len(w.pending) && w.pending[n].settled {
		n++
	}
	if n == 0 {
		return
	}
	last := w.pending[n-1].r
	clear(w.pending[:n])
	w.pending = w.pending[n:]
	if !w.s.crashed.Load() {
		w.s.cl.MarkCommitRecords(last)
	}
	select {
	case w.room <- struct{}{}:
	default:
	}
}

// handle delivers r until its handler succeeds or it is parked. It
// reports false when the worker was stopped first, leaving r unhandled.
func (w *worker) handle(r *kgo.Record) bool {
	s, b := w.s, w.s.b
	msg, err := decode(b.opts.TopicPrefix, r.Topic, r.Key, r.Value)
	if err != nil {
		raw := &calf.Message{
			ID:      r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10),
			Channel: r.Topic,
			Key:     string(r.Key),
			Data:    r.Value,
		}
		return s.run.ParkRetried(raw, calf.Permanent(err), 1, w.stopping())
	}
	if !calf.MatchChannel(s.pattern, msg.Channel) {
		return true // a channel that shares the topic of a matching one
	}
	if w.hasSeen(msg.ID) {
		return true // published again within the duplicate window
	}
	switch s.run.Deliver(msg, delivery.NewTracker(1), w.stopping()) {
	case delivery.Handled, delivery.Parked:
		w.addSeen(msg.ID)
		return true
	default:
		return false // interrupted: the next owner handles it again
	}
}

// stopping tells a delivery of the partition when to stop: once the worker
// is stopped, or the subscription closing.
func (w *worker) stopping() delivery.Stop {
	return delivery.Stop{
		C:      w.stopCh,
		Halted: func() bool { return w.stopped() || w.s.ctx.Err() != nil },
	}
}

func (w *worker) hasSeen(id string) bool {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	return w.seen.has(id)
}

func (w *worker) addSeen(id string) {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	w.seen.add(id)
}
