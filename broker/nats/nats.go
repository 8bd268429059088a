package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

// Default values of [Options].
const (
	// DefaultConcurrency is the default bound on the messages one
	// subscription handles at once.
	DefaultConcurrency = 1024
	// DefaultWindow is the default bound on the messages a member holds
	// of one partition.
	DefaultWindow = 128
	// DefaultStream is the default name of the JetStream stream.
	DefaultStream = "CALF"
	// DefaultPrefix is the default first token of the subjects messages are
	// published on. Calf's channels start with "calf.", so the subjects of
	// the broker cannot be mistaken for channels.
	DefaultPrefix = "calfbus"
	// DefaultPartitions is the default number of partitions.
	DefaultPartitions = 16
	// DefaultAckWait is the default time the server waits for the outcome
	// of a delivery before redelivering it: the time after which the
	// messages a worker that died held come back. Handlers may run
	// longer: the broker tells the server every quarter of AckWait that
	// the messages it holds are still in progress. Two seconds bring a
	// dead worker's runs back in about 2.5 s; a worker that cannot send
	// its heartbeats or renew its leases for that long (a machine
	// overloaded for seconds) loses its messages and partitions to the
	// others, which handle them again: raise it for such hosts.
	DefaultAckWait = 2 * time.Second
	// DefaultPublishTimeout is the default bound on one attempt of a
	// publish.
	DefaultPublishTimeout = 5 * time.Second
	// DefaultMinBackoff is the default delay before the first redelivery.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is the default cap on the delay before a redelivery.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultDuplicateWindow is the default window within which a second
	// message with the id of an earlier one is dropped.
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultPrivateInactive is how long the server keeps the consumers of
	// a private group whose process went away without closing them.
	DefaultPrivateInactive = 30 * time.Second
)

// ErrGroupPattern is returned by [Broker.Subscribe] when a consumer group
// already exists with another pattern.
var ErrGroupPattern = errors.New("nats: group subscribed with another pattern")

// Options configures a [Broker]. A nil *Options means the defaults. Every
// process that shares a stream must use the same Stream, Prefix and
// Partitions.
type Options struct {
	// Stream is the name of the JetStream stream, created or updated on
	// open. Default: [DefaultStream].
	Stream string
	// Prefix is the first token of every subject; the stream captures
	// Prefix + ".>". Default: [DefaultPrefix].
	Prefix string
	// Partitions is the number of partitions messages are spread over by
	// key. Default: [DefaultPartitions]. Changing it while messages are
	// in flight breaks their per-key order.
	Partitions int
	// Replicas is the stream's replication factor. Default: 1.
	Replicas int
	// MaxAge bounds how long the stream keeps a message no group has
	// acknowledged. Default: no bound.
	MaxAge time.Duration
	// MaxBytes bounds the size of the stream; once it is reached Publish
	// fails. Default: no bound.
	MaxBytes int64
	// MaxPending bounds the messages the stream holds, published and not
	// yet handled or parked by every group they match: Publish blocks
	// while the stream holds this many, until handlers make room or its
	// context ends. A publish made from a handler of the broker (with the
	// handler's context or one derived from it) never blocks, so that
	// chains of handlers cannot deadlock; the bound is soft for their
	// output. Default: no bound.
	MaxPending int64
	// DuplicateWindow is the window within which a message published
	// again with the same id is dropped. Default: [DefaultDuplicateWindow].
	DuplicateWindow time.Duration
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
	// Backoff returns the delay before redelivering a message whose
	// delivery number attempt (1 for the first) failed. Default:
	// [calf.ExponentialBackoff] from [DefaultMinBackoff] to [DefaultMaxBackoff].
	Backoff func(attempt int) time.Duration
	// AckWait is how long the server waits for the outcome of a delivery
	// before it redelivers the message, when the worker handling it went
	// away. While a member holds a message, the broker tells the server
	// every quarter of AckWait that it is still working on it, so AckWait
	// bounds how long a crashed worker holds its messages, not how long a
	// handler may run. The leases on partitions last AckWait (at least
	// 2 s): a crashed worker's partitions move to the other members
	// after that. Default: [DefaultAckWait].
	AckWait time.Duration
	// Concurrency bounds the messages one subscription handles at once,
	// for subscriptions that do not set [calf.SubscribeOptions.Concurrency].
	// Messages of different keys are handled at once even when they share
	// a partition; only the messages of one key wait for each other.
	// Default: [DefaultConcurrency].
	Concurrency int
	// Window bounds the messages a member holds of one partition, in
	// progress or waiting behind another of their key (the consumers'
	// MaxAckPending, which every member of a group sets to its own
	// Window), so that a subscription holds at most Partitions × Window
	// messages in memory. Default: [DefaultWindow].
	Window int
	// Logger receives the broker's diagnostics: a warning for every parked
	// message, an error for a message that could not be parked. Default:
	// discard.
	Logger *slog.Logger
	// Now returns the current time, used to stamp dead letters.
	// Default: time.Now.
	Now func() time.Time
	// PublishTimeout bounds one attempt of a publish: an acknowledgement
	// that does not come within it (a server that died with the request in
	// flight) is asked for again, with the same message id, which the
	// stream deduplicates. Default: [DefaultPublishTimeout].
	PublishTimeout time.Duration
	// ConnectOptions are passed to the NATS connection (credentials, TLS,
	// reconnection), after the broker's own (among which reconnecting
	// without a limit).
	ConnectOptions []natsgo.Option
}

// Broker is a [calf.Broker] on NATS JetStream; see the package
// documentation for its delivery semantics. It is safe for concurrent use.
type Broker struct {
	opts Options
	log  *slog.Logger
	nc   *natsgo.Conn
	js   jetstream.JetStream
	// afterClose, when set, runs at the end of Close (tests stop the
	// server they started for the broker there).
	afterClose func()
	st         jetstream.Stream

	// An estimate of the messages the stream holds, for MaxPending: the
	// count last read from the server plus the messages published since.
	roomMu sync.Mutex
	known  int64
	since  int64

	leaseMu sync.Mutex
	leases  jetstream.KeyValue // the bucket of partition leases, once needed

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed atomic.Bool

	// interest is what Subscribed reads (see interest.go).
	interestMu sync.Mutex
	interest   interest

	// reconnected is when the connection last came back after losing its
	// server (UnixNano; zero before any), see Broker.leasesSettled.
	reconnected atomic.Int64
}

var _ calf.Broker = (*Broker)(nil)

// Open connects to the NATS server at url (for example
// nats://127.0.0.1:4222) and creates or updates the broker's stream.
func Open(ctx context.Context, url string, opts *Options) (*Broker, error) {
	o := withDefaults(opts)
	// Reconnect for as long as it takes: a server restart or an outage of
	// minutes must not close the broker for good.
	nc, err := natsgo.Connect(url, append([]natsgo.Option{natsgo.Name("calf"), natsgo.MaxReconnects(-1)}, o.ConnectOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", url, err)
	}
	b, err := open(ctx, nc, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

// OpenConn returns a broker on nc, an open connection to a NATS server
// with JetStream, and creates or updates the broker's stream. The broker
// takes nc over: Close closes it. Open connects and calls OpenConn; the
// embedded package ([github.com/calf-go/calf/broker/nats/embedded])
// connects to a server in the process. nc is closed when OpenConn fails.
func OpenConn(ctx context.Context, nc *natsgo.Conn, opts *Options) (*Broker, error) {
	if nc == nil {
		return nil, errors.New("nats: no connection")
	}
	b, err := open(ctx, nc, withDefaults(opts))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

func withDefaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = calf.DefaultMaxAttempts
	}
	if o.Backoff == nil {
		o.Backoff = calf.ExponentialBackoff(DefaultMinBackoff, DefaultMaxBackoff)
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func open(ctx context.Context, nc *natsgo.Conn, o Options) (*Broker, error) {
	if err := calf.ValidateChannel(o.Prefix); err != nil || o.Prefix != firstToken(o.Prefix) {
		return nil, fmt.Errorf("nats: prefix %q is not a single subject token", o.Prefix)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	cfg := jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "Calf messages",
		Subjects:    []string{o.Prefix + ".>"},
		Retention:   jetstream.InterestPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		MaxAge:      o.MaxAge,
		MaxBytes:    o.MaxBytes,
		Duplicates:  o.DuplicateWindow,
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	st, err := ensureStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: o, log: o.Logger, nc: nc, js: js, st: st, subs: map[*subscription]struct{}{}}
	// Note each reconnection, keeping the handler the connection came
	// with (OpenConn's caller may have set one).
	prev := nc.ReconnectHandler()
	nc.SetReconnectHandler(func(c *natsgo.Conn) {
		b.reconnected.Store(time.Now().UnixNano())
		if prev != nil {
			prev(c)
		}
	})
	return b, nil
}

func firstToken(s string) string {
	for i := range len(s) {
		if s[i] == '.' {
			return s[:i]
		}
	}
	return s
}

// handlerKey marks the contexts of this broker's handlers, so that Publish
// recognises a publish made while handling a message.
type handlerKey struct{}

// Publish stores msg in the stream, on the subject of its channel and the
// partition of its key, and returns once the server has acknowledged it. A
// message whose id the stream has seen within the duplicate window is
// dropped as a duplicate, without error. With [Options.MaxPending] set, it
// blocks while the stream is full, except when ctx is the context of one
// of the broker's handlers. It returns [calf.ErrClosed] once the broker is
// closed.
func (b *Broker) Publish(ctx context.Context, msg *calf.Message) error {
	if msg == nil {
		return errors.New("nats: publish nil message")
	}
	if b.closed.Load() {
		return calf.ErrClosed
	}
	if err := calf.ValidateChannel(msg.Channel); err != nil {
		return err
	}
	data, err := encode(msg)
	if err != nil {
		return err
	}
	if err := b.waitRoom(ctx); err != nil {
		return err
	}
	nm := &natsgo.Msg{
		Subject: subject(b.opts.Prefix, Partition(msg.Key, msg.ID, b.opts.Partitions), msg.Channel),
		Data:    data,
	}
	var popts []jetstream.PublishOpt
	if msg.ID != "" {
		popts = append(popts, jetstream.WithMsgID(msg.ID))
	}
	if err := b.publish(ctx, nm, msg, popts); err != nil {
		if b.closed.Load() {
			return calf.ErrClosed
		}
		if errors.Is(err, natsgo.ErrMaxPayload) {
			return &calf.SizeError{Channel: msg.Channel, Size: len(data), Limit: int(b.nc.MaxPayload())}
		}
		return fmt.Errorf("nats: publish %s on %s: %w", msg.ID, msg.Channel, err)
	}
	if b.opts.MaxPending > 0 {
		b.roomMu.Lock()
		b.since++
		b.roomMu.Unlock()
	}
	return nil
}

// publish sends nm, the encoding of msg, and waits for the stream's
// acknowledgement, each attempt bounded by PublishTimeout. An attempt that
// fails for want of the server (no acknowledgement in time, no responders
// while JetStream restarts, a connection being re-established) is made
// again after a backoff, with the same message id, for as long as ctx and
// the outage budget allow; the last such error is marked [calf.Unavailable].
// A message without an id is published once.
func (b *Broker) publish(ctx context.Context, nm *natsgo.Msg, msg *calf.Message, popts []jetstream.PublishOpt) error {
	budget := b.opts.OutageBudget
	if budget == 0 {
		budget = calf.DefaultOutageBudget
	}
	deadline := time.Now().Add(max(budget, 0))
	backoff := calf.ExponentialBackoff(50*time.Millisecond, time.Second)
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, b.opts.PublishTimeout)
		_, err := b.js.PublishMsg(actx, nm, popts...)
		cancel()
		if err == nil {
			return nil
		}
		if !publishOutage(err) || ctx.Err() != nil || b.closed.Load() || b.nc.IsClosed() {
			if publishOutage(err) {
				err = calf.Unavailable(err)
			}
			return err
		}
		if msg.ID == "" || time.Now().After(deadline) {
			return calf.Unavailable(err)
		}
		b.log.Debug("nats: publish failed for want of the server; trying again", "id", msg.ID, "channel", msg.Channel, "try", try, "error", err)
		t := time.NewTimer(backoff(try))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return calf.Unavailable(err)
		}
	}
}

// publishOutage reports whether a publish failed for want of the server
// rather than for what was published: no acknowledgement in time, no
// responders (JetStream not up yet), a connection lost or being
// re-established.
func publishOutage(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout),
		errors.Is(err, natsgo.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, natsgo.ErrDisconnected), errors.Is(err, natsgo.ErrConnectionReconnecting),
		errors.Is(err, natsgo.ErrStaleConnection):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: JetStream temporarily unavailable (a restart, no quorum).
		return apiErr.Code == 503
	}
	return calf.IsUnavailable(err)
}

// waitRoom blocks until the stream holds fewer than MaxPending messages,
// unless ctx is a handler's. It asks the server only when its estimate
// reaches the bound.
func (b *Broker) waitRoom(ctx context.Context) error {
	limit := b.opts.MaxPending
	if limit <= 0 || ctx.Value(handlerKey{}) == b {
		return nil
	}
	b.roomMu.Lock()
	estimate := b.known + b.since
	b.roomMu.Unlock()
	if estimate < limit {
		return nil
	}
	delay := time.Millisecond
	for {
		info, err := b.st.Info(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("nats: publish: stream %s is full: %w", b.opts.Stream, ctx.Err())
			}
			if b.closed.Load() {
				return calf.ErrClosed
			}
			return fmt.Errorf("nats: publish: stream %s: %w", b.opts.Stream, err)
		}
		n := int64(info.State.Msgs)
		b.roomMu.Lock()
		b.known, b.since = n, 0
		b.roomMu.Unlock()
		if n < limit {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("nats: publish: stream %s is full: %w", b.opts.Stream, ctx.Err())
		}
		delay = min(2*delay, 50*time.Millisecond)
		if b.closed.Load() {
			return calf.ErrClosed
		}
	}
}

// Close stops every subscription, waits for the handlers in progress,
// and closes the connection. Messages not yet handled stay in the
// stream. Publish and Subscribe fail with [calf.ErrClosed] afterwards.
// Close is idempotent; calling it from a handler never returns, since it
// waits for that handler.
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
	// Send the last acknowledgements before closing.
	if err := b.nc.FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("nats: flush: %w", err))
	}
	b.nc.Close()
	if b.afterClose != nil {
		b.afterClose()
	}
	return errors.Join(errs...)
}
