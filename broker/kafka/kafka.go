package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/calf-go/calf"
)

// Default values of [Options].
const (
	// DefaultPartitions is the default number of partitions of the topics
	// the broker creates.
	DefaultPartitions = 16
	// DefaultMinBackoff is the default delay before the first redelivery.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is the default cap on the delay before a redelivery.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultSessionTimeout is the time after its last heartbeat at which
	// the group coordinator declares a member dead and hands its
	// partitions to the others, when the cluster's lowest accepted session
	// timeout (group.min.session.timeout.ms) cannot be read. It is
	// Kafka's default for that setting.
	DefaultSessionTimeout = 6 * time.Second
	// MinDefaultSessionTimeout is the lowest session timeout the broker
	// chooses by itself, however low the cluster allows: three heartbeats
	// at [DefaultHeartbeatInterval] may go missing before a live member is
	// declared dead.
	MinDefaultSessionTimeout = 2 * time.Second
	// DefaultHeartbeatInterval is the default time between a member's
	// heartbeats. Members learn of a rebalance at their next heartbeat.
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// DefaultRebalanceTimeout is the default time the members of a group
	// have to rejoin it once a rebalance has begun.
	DefaultRebalanceTimeout = 30 * time.Second
	// DefaultCommitInterval is the default time between two commits of a
	// subscription's handled offsets.
	DefaultCommitInterval = 100 * time.Millisecond
	// DefaultDuplicateWindow is the default window within which a message
	// published again with the id of one handled is dropped.
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultMetadataMaxAge is the default time after which a subscription
	// to a pattern looks again for new topics that match it.
	DefaultMetadataMaxAge = 3 * time.Second
	// DefaultMaxBufferedRecords is the default number of records a broker
	// holds on their way to Kafka before Publish blocks.
	DefaultMaxBufferedRecords = 10000
	// DefaultFailoverAfter is the default time after which the members
	// of a process that stopped its liveness beats are removed from their
	// groups; see [Options.FailoverAfter].
	DefaultFailoverAfter = 2 * time.Second
	// DefaultQueueSize is the default number of fetched records a
	// subscription holds per partition before it pauses fetching that
	// partition.
	DefaultQueueSize = 256
	// DefaultConcurrency is the default bound on the messages one
	// subscription handles at once.
	DefaultConcurrency = 1024
)

// maxRecordBytes is the largest record franz-go produces by default (its
// ProducerBatchMaxBytes, which ClientOptions may change).
const maxRecordBytes = 1000012

// Options configures a [Broker]. A nil *Options means the defaults. Every
// process that shares a cluster must use the same TopicPrefix and
// Partitions.
type Options struct {
	// TopicPrefix is put before the topic name of every channel, as it is
	// ("prod." gives the topic "prod.calf.agent.a.input"); see [Topic].
	// It may hold the characters [a-zA-Z0-9._-]. Default: none, so that a
	// channel's topic is named like the channel.
	TopicPrefix string
	// Partitions is the number of partitions of the topics the broker
	// creates. Default: [DefaultPartitions]. Partitions spread a group's
	// work over its members (a partition belongs to one member at a time);
	// they do not bound how many keys a member handles at once (see
	// Concurrency).
	Partitions int
	// ReplicationFactor is the replication factor of the topics the
	// broker creates. Default: the cluster's default.
	ReplicationFactor int
	// MaxAttempts bounds the deliveries of a message before it is parked on
	// [calf.DeadLetterChannel], for subscriptions that do not set
	// [calf.SubscribeOptions.MaxAttempts]. Default: [calf.DefaultMaxAttempts].
	MaxAttempts int
	// OutageBudget bounds how long a message whose handler fails because a
	// service cannot be reached ([calf.IsUnavailable]) is retried without
	// using up its attempts, for subscriptions that do not set
	// [calf.SubscribeOptions.OutageBudget]. Default:
	// [calf.DefaultOutageBudget]; negative: no budget.
	OutageBudget time.Duration
	// Backoff returns the delay before handling again a message whose
	// delivery number attempt (1 for the first) failed. Default:
	// [calf.ExponentialBackoff] from [DefaultMinBackoff] to [DefaultMaxBackoff].
	Backoff func(attempt int) time.Duration
	// Concurrency bounds the messages one subscription handles at once,
	// for subscriptions that do not set [calf.SubscribeOptions.Concurrency].
	// Messages of different keys are handled at once even when they share
	// a partition; only the messages of one key wait for each other.
	// Default: [DefaultConcurrency].
	Concurrency int
	// SessionTimeout is how long after a member's last heartbeat the group
	// coordinator declares it dead and moves its partitions to the other
	// members: the time a crashed worker holds up its partitions. It must
	// lie within the cluster's group.min.session.timeout.ms and
	// group.max.session.timeout.ms. Default: the lowest the cluster
	// accepts (its group.min.session.timeout.ms, 6 s on a stock Kafka), but
	// no less than [MinDefaultSessionTimeout]; [DefaultSessionTimeout] if
	// the cluster does not tell.
	SessionTimeout time.Duration
	// FailoverAfter is how long a crashed process holds up its
	// partitions when its groups have members in other processes. Every
	// broker with a consumer group subscription publishes a liveness beat
	// on [MembersTopic] eight times per FailoverAfter; when a broker's
	// beats stop for FailoverAfter, the brokers that share a group with
	// it remove its members from the group, whose partitions then move to
	// the live members without waiting for SessionTimeout. A live member
	// removed by mistake (a process paused for that long) rejoins at its
	// next heartbeat; its messages not yet committed are delivered again.
	// Default: [DefaultFailoverAfter]; a negative value turns it off, and
	// partitions then move after SessionTimeout.
	FailoverAfter time.Duration
	// HeartbeatInterval is the time between a member's heartbeats.
	// Default: [DefaultHeartbeatInterval], or a third of SessionTimeout if
	// that is less.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the members have to rejoin their group
	// when it rebalances. Default: [DefaultRebalanceTimeout].
	RebalanceTimeout time.Duration
	// CommitInterval is the time between two commits of the offsets a
	// subscription has handled. A member that crashes has its messages
	// handled since its last commit delivered again. Default:
	// [DefaultCommitInterval].
	CommitInterval time.Duration
	// DuplicateWindow is the window within which a message with the id
	// of one a member handled (or parked) in the same partition is
	// dropped without calling the handler: a message published twice, by
	// a producer that retried or a handler that ran twice, is handled
	// once. A member remembers the last 10000 ids of each partition it
	// holds, and forgets them when the partition moves. Default:
	// [DefaultDuplicateWindow]; a negative value turns it off.
	DuplicateWindow time.Duration
	// MetadataMaxAge is how often a subscription to a pattern with
	// wildcards looks for new matching topics created by other processes.
	// Topics this broker creates are found at once. Default:
	// [DefaultMetadataMaxAge].
	MetadataMaxAge time.Duration
	// MaxBufferedRecords bounds the records waiting to be sent to Kafka:
	// Publish blocks while this many are waiting, until the cluster
	// acknowledges some or its context ends. Default:
	// [DefaultMaxBufferedRecords].
	MaxBufferedRecords int
	// MaxPending bounds the messages of a topic that a consumer group has
	// not handled yet: Publish blocks while a named group of the message's
	// topic is this many messages behind, by the offsets it committed
	// (which stop at a slow key's record: set it well above QueueSize),
	// until the group catches up or the publisher's context ends. A
	// publish made from a handler of the broker (with the handler's
	// context or one derived from it) never blocks, so that chains of
	// handlers cannot deadlock; the bound is soft for their output. Each
	// process counts its own publishes and asks the cluster for the
	// groups' lag only when its estimate reaches the bound, so publishers
	// in several processes may overshoot it by a few messages each.
	// Subscriptions without a group are not counted. Default: no bound.
	MaxPending int64
	// QueueSize bounds the fetched records a subscription holds per
	// partition, not yet handled: fetching the partition pauses while it
	// holds this many. Default: [DefaultQueueSize].
	QueueSize int
	// Logger receives the broker's diagnostics: a warning for every parked
	// message, an error for a message that could not be parked, and the
	// log lines of the franz-go clients at the levels it enables.
	// Default: discard.
	Logger *slog.Logger
	// Now returns the current time, used to stamp dead letters.
	// Default: time.Now.
	Now func() time.Time
	// ClientOptions are passed to every franz-go client the broker makes
	// (SASL, TLS, dialer, client id), after the broker's own.
	ClientOptions []kgo.Opt
}

// Broker is a [calf.Broker] on Kafka; see the package documentation for
// its delivery semantics. It is safe for concurrent use.
type Broker struct {
	opts  Options
	log   *slog.Logger
	seeds []string
	cl    *kgo.Client // produces, and runs admin requests
	adm   *kadm.Client

	topics sync.Map // topic name → struct{}: topics known to exist
	live   *liveness

	// An estimate of the lag of the slowest group of each topic, for
	// MaxPending: the lag last read from the cluster plus the messages
	// published since.
	roomMu sync.Mutex
	room   map[string]*room

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed atomic.Bool
}

var _ calf.Broker = (*Broker)(nil)

// Open connects to the Kafka cluster whose bootstrap brokers are seeds
// ("host:port"), and checks that it answers before ctx ends.
func Open(ctx context.Context, seeds []string, opts *Options) (*Broker, error) {
	if len(seeds) == 0 {
		return nil, errors.New("kafka: no seed brokers")
	}
	o := withDefaults(opts)
	for i := 0; i < len(o.TopicPrefix); i++ {
		if c := o.TopicPrefix[i]; c != '.' && !topicByte(c) {
			return nil, fmt.Errorf("kafka: topic prefix %q holds %q; use [a-zA-Z0-9._-]", o.TopicPrefix, c)
		}
	}
	copts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("calf"),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(o.MaxBufferedRecords),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.WithLogger(kgoLogger{o.Logger}),
	}
	cl, err := kgo.NewClient(append(copts, o.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: connect to %v: %w", seeds, err)
	}
	b := &Broker{
		opts:  o,
		log:   o.Logger,
		seeds: seeds,
		cl:    cl,
		adm:   kadm.NewClient(cl),
		room:  map[string]*room{},
		subs:  map[*subscription]struct{}{},
	}
	if b.opts.SessionTimeout <= 0 {
		b.opts.SessionTimeout = b.sessionTimeout(ctx)
	}
	if b.opts.HeartbeatInterval <= 0 {
		b.opts.HeartbeatInterval = min(DefaultHeartbeatInterval, b.opts.SessionTimeout/3)
	}
	b.live = newLiveness(b)
	return b, nil
}

// sessionTimeout returns the default session timeout: the lowest the
// cluster accepts, but no less than MinDefaultSessionTimeout.
func (b *Broker) sessionTimeout(ctx context.Context) time.Duration {
	brokers, err := b.adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		b.log.Debug("kafka: list brokers for group.min.session.timeout.ms", "error", err)
		return DefaultSessionTimeout
	}
	configs, err := b.adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()[0])
	if err != nil {
		b.log.Debug("kafka: describe group.min.session.timeout.ms", "error", err)
		return DefaultSessionTimeout
	}
	for _, rc := range configs {
		for _, c := range rc.Configs {
			if c.Key != "group.min.session.timeout.ms" || c.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil || ms <= 0 {
				return DefaultSessionTimeout
			}
			return max(time.Duration(ms)*time.Millisecond, MinDefaultSessionTimeout)
		}
	}
	return DefaultSessionTimeout
}

func withDefaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = -1
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = calf.DefaultMaxAttempts
	}
	if o.Backoff == nil {
		o.Backoff = calf.ExponentialBackoff(DefaultMinBackoff, DefaultMaxBackoff)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.RebalanceTimeout <= 0 {
		o.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.MetadataMaxAge <= 0 {
		o.MetadataMaxAge = DefaultMetadataMaxAge
	}
	if o.MaxBufferedRecords <= 0 {
		o.MaxBufferedRecords = DefaultMaxBufferedRecords
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.FailoverAfter == 0 {
		o.FailoverAfter = DefaultFailoverAfter
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Publish appends msg to the topic of its channel, creating the topic
// with [Options.Partitions] partitions if it does not exist, in the
// partition of its key, and returns once the cluster has acknowledged it.
// It blocks while [Options.MaxBufferedRecords] records wait to be sent,
// until ctx ends. It returns [calf.ErrClosed] once the broker is closed.
func (b *Broker) Publish(ctx context.Context, msg *calf.Message) error {
	if msg == nil {
		return errors.New("kafka: publish nil message")
	}
	if b.closed.Load() {
		return calf.ErrClosed
	}
	topic, err := Topic(b.opts.TopicPrefix, msg.Channel)
	if err != nil {
		return err
	}
	value, err := encode(msg)
	if err != nil {
		return err
	}
	if err := b.ensureTopic(ctx, topic); err != nil {
		return err
	}
	if err := b.waitRoom(ctx, topic); err != nil {
		return err
	}
	r := &kgo.Record{Topic: topic, Key: recordKey(msg), Value: value}
	if err := b.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		switch {
		case b.closed.Load() || errors.Is(err, kgo.ErrClientClosed):
			return calf.ErrClosed
		case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
			return &calf.SizeError{Channel: msg.Channel, Size: len(value), Limit: maxRecordBytes}
		case errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID):
			// Deleted meanwhile: the next Publish creates it again.
			b.topics.Delete(topic)
			b.cl.PurgeTopicsFromClient(topic)
		}
		return fmt.Errorf("kafka: publish %s on %s: %w", msg.ID, msg.Channel, err)
	}
	if b.opts.MaxPending > 0 {
		b.roomMu.Lock()
		b.roomOf(topic).since++
		b.roomMu.Unlock()
	}
	return nil
}

// handlerKey marks the contexts of this broker's handlers, so that Publish
// recognises a publish made while handling a message.
type handlerKey struct{}

// room is the estimate of a topic's lag.
type room struct {
	known int64 // the lag of the slowest group, as last read
	since int64 // messages published since
}

// roomOf returns the estimate of topic; b.roomMu is held.
func (b *Broker) roomOf(topic string) *room {
	r := b.room[topic]
	if r == nil {
		r = &room{}
		b.room[topic] = r
	}
	return r
}

// waitRoom blocks until no group of topic is MaxPending messages behind,
// unless ctx is a handler's. It asks the cluster only when its estimate
// reaches the bound.
func (b *Broker) waitRoom(ctx context.Context, topic string) error {
	limit := b.opts.MaxPending
	if limit <= 0 || ctx.Value(handlerKey{}) == b {
		return nil
	}
	b.roomMu.Lock()
	r := b.roomOf(topic)
	estimate := r.known + r.since
	b.roomMu.Unlock()
	if estimate < limit {
		return nil
	}
	delay := time.Millisecond
	for {
		lag, err := b.lag(ctx, topic)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kafka: publish: topic %s is full: %w", topic, ctx.Err())
			}
			if b.closed.Load() {
				return calf.ErrClosed
			}
			return fmt.Errorf("kafka: publish: lag of topic %s: %w", topic, err)
		}
		b.roomMu.Lock()
		r.known, r.since = lag, 0
		b.roomMu.Unlock()
		if lag < limit {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("kafka: publish: topic %s is full: %w", topic, ctx.Err())
		}
		delay = min(2*delay, 50*time.Millisecond)
		if b.closed.Load() {
			return calf.ErrClosed
		}
	}
}

// lag returns how many messages of topic the slowest consumer group that
// committed offsets on it has not handled.
func (b *Broker) lag(ctx context.Context, topic string) (int64, error) {
	lags, err := b.adm.Lag(ctx)
	if err != nil {
		return 0, err
	}
	var most int64
	for _, g := range lags {
		var n int64
		for _, l := range g.Lag[topic] {
			if l.Err == nil && l.Lag > 0 {
				n += l.Lag
			}
		}
		most = max(most, n)
	}
	return most, nil
}

// ensureTopic creates topic unless it is known to exist. A topic created
// here is announced to the subscriptions whose pattern matches it.
func (b *Broker) ensureTopic(ctx context.Context, topic string) error {
	if _, ok := b.topics.Load(topic); ok {
		return nil
	}
	partitions := int32(b.opts.Partitions)
	var configs map[string]*string
	switch {
	case strings.HasPrefix(topic, b.opts.TopicPrefix+calf.InboxPrefix):
		// An inbox has one consumer, the client that owns it, which reads
		// replies as they come: what is older than a day was never read.
		partitions = 1
		configs = map[string]*string{"retention.ms": new(inboxRetention)}
	case topic == b.opts.TopicPrefix+MembersTopic:
		// Every broker reads the beats whole, and only the last ones.
		partitions = 1
		configs = map[string]*string{"retention.ms": new(membersRetention)}
	}
	resp, err := b.adm.CreateTopic(ctx, partitions, int16(b.opts.ReplicationFactor), configs, topic)
	switch {
	case err == nil:
		b.announce(topic)
	case errors.Is(err, kerr.TopicAlreadyExists):
	case b.closed.Load() || errors.Is(err, kgo.ErrClientClosed):
		return calf.ErrClosed
	default:
		// A cluster that does not let us create topics may have the
		// topic already.
		if details, lerr := b.adm.ListTopics(ctx, topic); lerr == nil && details.Has(topic) && details[topic].Err == nil {
			break
		}
		if resp.ErrMessage != "" {
			err = fmt.Errorf("%w: %s", err, resp.ErrMessage)
		}
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	b.topics.Store(topic, struct{}{})
	return nil
}

// CreateChannels creates the topics of channels, so that pattern
// subscriptions in other processes find them when they start rather than
// at their next metadata refresh; see [calf.ChannelCreator].
func (b *Broker) CreateChannels(ctx context.Context, channels ...string) error {
	if b.closed.Load() {
		return calf.ErrClosed
	}
	topics, err := b.topicsOf(channels)
	if err != nil {
		return err
	}
	for _, topic := range topics {
		if err := b.ensureTopic(ctx, topic); err != nil {
			return err
		}
	}
	return nil
}

// topicsOf returns the topics of channels, which must be valid channels.
func (b *Broker) topicsOf(channels []string) ([]string, error) {
	topics := make([]string, 0, len(channels))
	for _, ch := range channels {
		if err := calf.ValidateChannel(ch); err != nil {
			return nil, err
		}
		topic, err := Topic(b.opts.TopicPrefix, ch)
		if err != nil {
			return nil, err
		}
		topics = append(topics, topic)
	}
	return topics, nil
}

// inboxRetention is the retention.ms of a client's inbox topic: one day.
const inboxRetention = "86400000"

// DeleteChannels deletes the topics of channels, with their messages (see
// [calf.ChannelDeleter]); a channel without a topic is skipped. A
// [calf.Client] deletes its inbox this way when it shuts down. Publishing
// on a deleted channel creates its topic again.
func (b *Broker) DeleteChannels(ctx context.Context, channels ...string) error {
	if b.closed.Load() {
		return calf.ErrClosed
	}
	topics, err := b.topicsOf(channels)
	if err != nil {
		return err
	}
	resps, err := b.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: delete topics %s: %w", strings.Join(topics, ", "), err)
	}
	var errs []error
	for _, topic := range topics {
		b.topics.Delete(topic)
		r, ok := resps[topic]
		if !ok || r.Err == nil || errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			continue
		}
		errs = append(errs, fmt.Errorf("kafka: delete topic %s: %w", topic, r.Err))
	}
	b.cl.PurgeTopicsFromClient(topics...)
	return errors.Join(errs...)
}

// announce has the subscriptions whose pattern matches topic look for new
// topics now, rather than at their next metadata refresh.
func (b *Broker) announce(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.topics.re == nil || !s.topics.match(topic) {
			continue
		}
		if s.private {
			s.created(topic)
		} else {
			s.cl.ForceMetadataRefresh()
		}
	}
}

// Close stops every subscription, waits for the handlers in progress,
// commits what they handled, and closes the connections. Messages not yet
// handled stay in their topics. Publish and Subscribe fail with
// [calf.ErrClosed] afterwards. Close is idempotent; calling it from a
// handler never returns, since it waits for that handler.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed.Swap(true) {
		b.mu.Unlock()
		return nil
	}
	subs := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.Close())
	}
	b.live.stop(true)
	b.cl.Close()
	return errors.Join(errs...)
}

// crash abandons the broker as a killed process would: its subscriptions
// stop without waiting for their handlers and without committing, and its
// connections close. Tests use it to lose acknowledgements.
func (b *Broker) crash() {
	b.mu.Lock()
	b.closed.Store(true)
	subs := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.crash()
	}
	b.live.stop(false)
	b.cl.Close()
}
