package calf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxMessageSize is the default limit on a message's encoded data.
const DefaultMaxMessageSize = 1 << 20

// Options configures a [Client]. A nil *Options means the defaults.
type Options struct {
	// Logger receives the client's diagnostics. Default: discard.
	Logger *slog.Logger
	// MaxMessageSize bounds the size of a message's data in bytes.
	// Default: [DefaultMaxMessageSize].
	MaxMessageSize int
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// NewID returns a fresh message id. Default: [NewID].
	NewID func() string
	// Name names this process (a worker) in the messages it publishes
	// ([Metadata.Producer]), such as "host-1/4242" ([ProcessName]).
	// Default: none.
	Name string
	// FollowBuffer bounds the messages a [Follower] holds that its Next
	// has not taken yet. A follower whose buffer is full stops collecting:
	// Next returns what it holds, then [ErrFollowerBehind] with the count
	// of the messages dropped, so that a reader that fell behind always
	// learns it, and never reads a stream with a hole in it.
	// Default: [DefaultFollowBuffer].
	FollowBuffer int
}

// DefaultFollowBuffer is the default of [Options.FollowBuffer].
const DefaultFollowBuffer = 1 << 16

// ProcessName returns a name for this process: its host name and process
// id, "host/pid".
func ProcessName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// Client emits events, registers handlers and correlates replies on a
// [Broker]. It is safe for concurrent use.
type Client struct {
	broker Broker
	log    *slog.Logger
	max    int
	now    func() time.Time
	newID  func() string
	name   string
	inbox  string

	followMax int // Options.FollowBuffer

	mu         sync.Mutex
	subs       []Subscription
	taps       map[string]*tap
	closed     bool
	onShutdown []func()

	orphans   atomic.Int64
	inboxUsed atomic.Bool // Inbox was called: delete the inbox on shutdown
}

// NewClient returns a client on b.
func NewClient(b Broker, opts *Options) *Client {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = NewID
	}
	if o.FollowBuffer <= 0 {
		o.FollowBuffer = DefaultFollowBuffer
	}
	return &Client{broker: b, log: o.Logger, max: o.MaxMessageSize, now: o.Now, newID: o.NewID, name: o.Name, followMax: o.FollowBuffer,
		inbox: InboxPrefix + NewID(), taps: map[string]*tap{}}
}

// InboxPrefix starts the name of every client's inbox channel.
const InboxPrefix = "calf.inbox."

// Inbox returns the client's own channel, "calf.inbox." followed by an id
// unique to the client. A request that names it as the place to answer
// gets its reply delivered to this client alone: callers in many processes
// then each receive their own replies, instead of every caller receiving
// every reply on a shared channel. Follow the inbox with [Client.Follow].
// When the client shuts down, it deletes its inbox on a broker that can (a
// [ChannelDeleter]: a Kafka topic, the messages of a NATS stream).
func (c *Client) Inbox() string {
	c.inboxUsed.Store(true)
	return c.inbox
}

// Broker returns the client's broker.
func (c *Client) Broker() Broker { return c.broker }

// Logger returns the client's logger.
func (c *Client) Logger() *slog.Logger { return c.log }

// Now returns the client's current time.
func (c *Client) Now() time.Time { return c.now() }

// MaxMessageSize returns the client's limit on a message's data.
func (c *Client) MaxMessageSize() int { return c.max }

// EmitOption adjusts a message built by [Client.Emit].
type EmitOption func(*Message)

// WithID sets the message id. Use a deterministic id for an event that may
// be emitted again after a crash, so that consumers can recognise it.
func WithID(id string) EmitOption { return func(m *Message) { m.ID = id } }

// WithKey sets the ordering key. The default is the run id.
func WithKey(key string) EmitOption { return func(m *Message) { m.Key = key } }

// WithMetadata sets the non-zero fields of md on the message, over what it
// inherited from the message being handled.
func WithMetadata(md Metadata) EmitOption {
	return func(m *Message) {
		if md.CorrelationID != "" {
			m.Metadata.CorrelationID = md.CorrelationID
		}
		if md.CausationID != "" {
			m.Metadata.CausationID = md.CausationID
		}
		if md.RunID != "" {
			m.Metadata.RunID = md.RunID
		}
		if md.SessionID != "" {
			m.Metadata.SessionID = md.SessionID
		}
		if md.Traceparent != "" {
			m.Metadata.Traceparent = md.Traceparent
		}
		if !md.Time.IsZero() {
			m.Metadata.Time = md.Time
		}
		if md.Producer != "" {
			m.Metadata.Producer = md.Producer
		}
	}
}

// NewMessage builds a message for channel with data encoded as JSON (a
// json.RawMessage or []byte is taken as already encoded). When ctx carries a
// message being handled, the new message inherits its correlation id, run
// id, session id and trace context, and its causation id is the handled
// message's id. The key defaults to the run id.
func (c *Client) NewMessage(ctx context.Context, channel string, data any, opts ...EmitOption) (*Message, error) {
	raw, err := encodeData(data)
	if err != nil {
		return nil, fmt.Errorf("calf: encode data for %s: %w", channel, err)
	}
	return c.newMessage(ctx, channel, raw, opts), nil
}

// newMessage is NewMessage with the data encoded.
func (c *Client) newMessage(ctx context.Context, channel string, raw json.RawMessage, opts []EmitOption) *Message {
	m := &Message{Channel: channel, Data: raw}
	if in, ok := MessageFromContext(ctx); ok {
		m.Metadata = in.Metadata
		m.Metadata.CausationID = in.ID
		m.Metadata.Attempt = 0
		m.Metadata.Producer = ""
	}
	m.Metadata.Time = time.Time{}
	for _, o := range opts {
		o(m)
	}
	if m.ID == "" {
		m.ID = c.newID()
	}
	if m.Key == "" {
		m.Key = m.Metadata.RunID
	}
	if m.Metadata.Time.IsZero() {
		m.Metadata.Time = c.now()
	}
	return m
}

func encodeData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return d, nil
	case []byte:
		return json.RawMessage(d), nil
	default:
		return json.Marshal(d)
	}
}

// Emit builds a message with [Client.NewMessage] and publishes it.
func (c *Client) Emit(ctx context.Context, channel string, data any, opts ...EmitOption) (*Message, error) {
	raw, err := encodeData(data)
	if err != nil {
		return nil, fmt.Errorf("calf: encode data for %s: %w", channel, err)
	}
	m := c.newMessage(ctx, channel, raw, opts)
	// Data that json.Marshal produced here, and that no option replaced, is
	// valid JSON: checking it again would scan every byte once more.
	encoded := false
	switch data.(type) {
	case nil, json.RawMessage, []byte:
	default:
		encoded = len(raw) > 0 && len(m.Data) == len(raw) && &m.Data[0] == &raw[0]
	}
	return m, c.publish(ctx, m, encoded)
}

// Publish checks msg against the channel rules and the size limit and
// publishes it.
func (c *Client) Publish(ctx context.Context, msg *Message) error {
	return c.publish(ctx, msg, false)
}

// publish is Publish; validJSON says that msg.Data is known to be valid
// JSON.
func (c *Client) publish(ctx context.Context, msg *Message, validJSON bool) error {
	if err := ValidateChannel(msg.Channel); err != nil {
		return err
	}
	if len(msg.Data) > c.max {
		return &SizeError{Channel: msg.Channel, Size: len(msg.Data), Limit: c.max}
	}
	if !validJSON && len(msg.Data) > 0 && !json.Valid(msg.Data) {
		return fmt.Errorf("calf: data of message %s on %s is not valid JSON", msg.ID, msg.Channel)
	}
	if msg.ID == "" {
		msg.ID = c.newID()
	}
	if msg.Metadata.Time.IsZero() {
		msg.Metadata.Time = c.now()
	}
	if msg.Metadata.Producer == "" {
		msg.Metadata.Producer = c.name
	}
	return c.broker.Publish(ctx, msg)
}

// Handle subscribes h to pattern. The handler's context carries the message
// (so that [Client.Emit] inside it propagates correlation). A panic in h is
// the broker's to recover, as for every subscriber ([Broker]): it is a
// failure, so that the message is retried and then dead-lettered rather
// than crashing the process. The subscription lasts until the client is
// shut down.
func (c *Client) Handle(ctx context.Context, pattern string, h Handler, opts *SubscribeOptions) error {
	if err := ValidatePattern(pattern); err != nil {
		return err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	sub, err := c.broker.Subscribe(ctx, pattern, c.wrap(h), opts)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = sub.Close()
		return ErrClosed
	}
	c.subs = append(c.subs, sub)
	return nil
}

func (c *Client) wrap(h Handler) Handler {
	return func(ctx context.Context, msg *Message) error {
		if in, ok := MessageFromContext(ctx); !ok || in != msg {
			ctx = ContextWithMessage(ctx, msg) // the broker did not
		}
		return h(ctx, msg)
	}
}

// Request emits data on channel and waits for the first message matching
// replyPattern whose correlation id is the request's. The request's
// correlation id is taken from the options, or from the message being
// handled, or else is the new message's id. It returns [ErrTimeout] (wrapped
// with ctx's error) when ctx ends first.
func (c *Client) Request(ctx context.Context, channel string, data any, replyPattern string, opts ...EmitOption) (*Message, error) {
	m, err := c.NewMessage(ctx, channel, data, opts...)
	if err != nil {
		return nil, err
	}
	if m.Metadata.CorrelationID == "" {
		m.Metadata.CorrelationID = m.ID
	}
	f, err := c.Follow(ctx, replyPattern, m.Metadata.CorrelationID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := c.Publish(ctx, m); err != nil {
		return nil, err
	}
	return f.Next(ctx)
}

// Follow starts collecting the messages matching pattern whose correlation
// id is correlationID, before anything is emitted, so that none is missed.
// The client keeps one subscription per pattern and routes each message to
// its follower by correlation id, so concurrent followers cost a map lookup
// each, not a subscription each. Close the follower when done.
func (c *Client) Follow(ctx context.Context, pattern, correlationID string) (*Follower, error) {
	if correlationID == "" {
		return nil, errors.New("calf: follow needs a correlation id")
	}
	t, err := c.tap(pattern)
	if err != nil {
		return nil, err
	}
	f := &Follower{c: c, id: correlationID, max: c.followMax, notify: make(chan struct{}, 1)}
	return f, f.join(t, false)
}

// join registers f on t, for its correlation id or, with tree, for the ids
// derived from it too, unless f is closed.
func (f *Follower) join(t *tap, tree bool) error {
	// The tap's lock is never taken with the follower's held: a delivery
	// takes them in the other order.
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	f.taps = append(f.taps, t)
	f.mu.Unlock()
	t.add(f, tree)
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		// Close ran meanwhile, maybe before t.add: undo it.
		t.remove(f)
		return ErrClosed
	}
	return nil
}

func (t *tap) add(f *Follower, tree bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.followers
	if tree {
		m = t.trees
	}
	if m[f.id] == nil {
		m[f.id] = map[*Follower]struct{}{}
	}
	m[f.id][f] = struct{}{}
}

func (t *tap) remove(f *Follower) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range []map[string]map[*Follower]struct{}{t.followers, t.trees} {
		if fs := m[f.id]; fs != nil {
			delete(fs, f)
			if len(fs) == 0 {
				delete(m, f.id)
			}
		}
	}
}

// Add has the follower also collect the messages with its correlation id
// on the channels matching pattern, in the order they arrive: one
// follower, and one Next, for the events of several channels. Give it
// patterns that do not overlap: each delivers on its own, so a message
// that two of them match arrives twice. It fails
// like [Client.Follow], and with [ErrClosed] once the follower is closed.
func (f *Follower) Add(pattern string) error {
	t, err := f.c.tap(pattern)
	if err != nil {
		return err
	}
	return f.join(t, false)
}

// ID returns the correlation id the follower follows.
func (f *Follower) ID() string { return f.id }

// AddTree is Add for the messages whose correlation id is the follower's
// or derives from it: the follower's id followed by '.' or '/' and more,
// as the ids of the runs a run starts derive from its own ("r1.2.writer",
// "r1/call_1").
func (f *Follower) AddTree(pattern string) error {
	t, err := f.c.tap(pattern)
	if err != nil {
		return err
	}
	return f.join(t, true)
}

// OrphanReplies counts messages that reached one of the client's follow
// subscriptions while no follower waited for their correlation id: replies
// that arrived late, or that belong to requests made elsewhere. They are
// dropped, never handed to another request.
func (c *Client) OrphanReplies() int64 { return c.orphans.Load() }

type tap struct {
	c         *Client
	pattern   string
	mu        sync.Mutex
	followers map[string]map[*Follower]struct{}
	// trees are the followers of a correlation id and of the ids derived
	// from it; see [Follower.AddTree].
	trees map[string]map[*Follower]struct{}
}

func (c *Client) tap(pattern string) (*tap, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if t, ok := c.taps[pattern]; ok {
		return t, nil
	}
	if err := ValidatePattern(pattern); err != nil {
		return nil, err
	}
	t := &tap{c: c, pattern: pattern, followers: map[string]map[*Follower]struct{}{}, trees: map[string]map[*Follower]struct{}{}}
	// The tap outlives the caller that created it: it must not keep that
	// caller's context values.
	sub, err := c.broker.Subscribe(context.WithoutCancel(context.Background()), pattern, t.deliver, nil)
	if err != nil {
		return nil, err
	}
	c.subs = append(c.subs, sub)
	c.taps[pattern] = t
	return t, nil
}

func (t *tap) deliver(_ context.Context, msg *Message) error {
	corr := msg.Metadata.CorrelationID
	t.mu.Lock()
	fs := t.followers[corr]
	for f := range fs {
		f.push(msg)
	}
	n := len(fs)
	if len(t.trees) > 0 {
		for id := corr; ; {
			for f := range t.trees[id] {
				f.push(msg)
				n++
			}
			i := strings.LastIndexAny(id, "./")
			if i < 0 {
				break
			}
			id = id[:i]
		}
	}
	t.mu.Unlock()
	if n == 0 && t.pattern != DeadLetterChannel {
		// Dead letters are not replies: those of other requests are
		// expected.
		t.c.orphans.Add(1)
		t.c.log.Debug("calf: message with no follower", "channel", msg.Channel, "id", msg.ID, "correlation_id", msg.Metadata.CorrelationID)
	}
	return nil
}

// Follower collects the messages of one correlation id; see
// [Client.Follow]. It buffers what arrives until Next takes it, so a slow
// reader never blocks the broker. A message delivered again with the same
// channel and id (a durable broker delivers at least once: a delivery
// whose acknowledgement was lost in a broker's restart comes again) is
// collected once. The buffer is bounded
// ([Options.FollowBuffer]): a follower whose reader fell that far behind
// stops collecting, and its Next returns [ErrFollowerBehind] after the
// messages it holds.
type Follower struct {
	c       *Client
	id      string
	max     int
	mu      sync.Mutex
	taps    []*tap
	queue   []*Message
	dropped int64 // messages that arrived after the buffer overflowed
	closed  bool
	notify  chan struct{}
	seen    seenMessages // what was collected, so that a redelivery is not
}

func (f *Follower) push(m *Message) {
	f.mu.Lock()
	switch {
	case f.closed:
	case !f.seen.add(m):
		// Delivered again (a durable broker's at-least-once delivery):
		// collected once.
		f.mu.Unlock()
		return
	case f.dropped > 0 || len(f.queue) >= f.max:
		// Once one message is dropped, every later one is: what Next
		// returns stays a prefix of what arrived, without a hole.
		if f.dropped == 0 {
			f.c.log.Warn("calf: follower fell behind; it stops collecting", "correlation_id", f.id, "buffer", f.max)
		}
		f.dropped++
	default:
		f.queue = append(f.queue, m)
	}
	f.mu.Unlock()
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// Next returns the next message, waiting until one arrives or ctx ends. When
// ctx ends it returns an error that matches both [ErrTimeout] and ctx.Err().
// Once the follower's buffer has overflowed, Next returns the messages it
// holds, then an error that matches [ErrFollowerBehind] and says how many
// messages were dropped.
func (f *Follower) Next(ctx context.Context) (*Message, error) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			m := f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return m, nil
		}
		closed, dropped := f.closed, f.dropped
		f.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if dropped > 0 {
			return nil, fmt.Errorf("%w: %d messages of correlation id %s dropped after its buffer of %d filled", ErrFollowerBehind, dropped, f.id, f.max)
		}
		select {
		case <-f.notify:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w waiting for correlation id %s: %w", ErrTimeout, f.id, context.Cause(ctx))
		}
	}
}

// Close stops collecting.
func (f *Follower) Close() {
	f.mu.Lock()
	f.closed = true
	f.queue = nil
	taps := f.taps
	f.taps = nil
	f.mu.Unlock()
	for _, t := range taps {
		t.remove(f)
	}
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// Run blocks until ctx is done, then shuts the client down, waiting up to
// drain for handlers in progress to finish. It returns nil on a clean
// shutdown.
func (c *Client) Run(ctx context.Context, drain time.Duration) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	return c.Shutdown(sctx)
}

// Shutdown stops every subscription of the client and waits for handlers in
// progress to return, or for ctx to end. Messages not yet handled stay
// unacknowledged. It does not close the broker.
func (c *Client) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	subs := c.subs
	c.subs = nil
	after := c.onShutdown
	c.onShutdown = nil
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		var errs []error
		for _, s := range subs {
			errs = append(errs, s.Close())
		}
		for _, fn := range after {
			fn()
		}
		done <- errors.Join(errs...)
	}()
	select {
	case err := <-done:
		c.deleteInbox(ctx)
		return err
	case <-ctx.Done():
		return fmt.Errorf("calf: shutdown: %w", context.Cause(ctx))
	}
}

// inboxDeleteTimeout bounds the deletion of a client's inbox at shutdown.
const inboxDeleteTimeout = 10 * time.Second

// deleteInbox deletes the client's inbox channel if it was handed out. A
// failure is logged: the client has shut down all the same, and the
// inbox is only left behind.
func (c *Client) deleteInbox(ctx context.Context) {
	if !c.inboxUsed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, inboxDeleteTimeout)
	defer cancel()
	if err := DeleteChannels(ctx, c.broker, c.inbox); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Warn("calf: delete the client's inbox", "channel", c.inbox, "err", err)
	}
}

// OnShutdown registers fn to run when the client shuts down, once its
// handlers have returned: to release what they used, such as the processes
// of MCP servers. On a client shut down already, fn runs at once.
func (c *Client) OnShutdown(fn func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		fn()
		return
	}
	c.onShutdown = append(c.onShutdown, fn)
	c.mu.Unlock()
}

// Close shuts the client down, waiting for handlers in progress.
func (c *Client) Close() error { return c.Shutdown(context.Background()) }
