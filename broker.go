package calf

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"
)

// Handler handles one delivered message. Returning nil acknowledges it;
// returning an error has it redelivered after a backoff, and after the
// subscription's last attempt it is parked on [DeadLetterChannel]. An error
// wrapped with [Permanent] parks the message at once. An error of a service
// that cannot be reached ([IsUnavailable]: a store or broker that is down
// or restarting) is retried without using up an attempt for as long as
// the subscription's outage budget allows ([DefaultOutageBudget]), so that
// an ordinary outage parks nothing. A dead letter itself is never parked:
// it is retried until its handler succeeds.
//
// The context carries the message ([MessageFromContext]) and is cancelled
// when the subscription closes.
type Handler func(ctx context.Context, msg *Message) error

// Broker is the contract every broker adapter implements: publish a message,
// and subscribe a handler to a channel pattern within a consumer group.
//
// Within one consumer group each message is handled by one subscriber;
// every group gets its own copy. Messages with the same key are handled in
// publish order within a group, one at a time: a message being retried
// holds back the later messages of its key, and no others. Delivery is at
// least once.
type Broker interface {
	// Publish sends msg. It returns once the broker has accepted the message
	// (for a durable broker: stored it). It blocks while the broker applies
	// backpressure, until ctx is done.
	Publish(ctx context.Context, msg *Message) error
	// Subscribe starts delivering messages whose channel matches pattern to
	// h. Delivery begins with messages published after Subscribe returns
	// (durable brokers resume a named group where it left off). A panic
	// in h is recovered by the broker and is a failure of that attempt,
	// retried and parked like an error: the one recovery on the handler
	// path, which every subscriber goes through.
	Subscribe(ctx context.Context, pattern string, h Handler, opts *SubscribeOptions) (Subscription, error)
	// Close stops every subscription, waits for handlers in progress, and
	// releases the broker's resources. Publish fails with [ErrClosed] after.
	Close() error
}

// ChannelCreator is implemented by brokers that keep a resource per
// channel, such as a Kafka topic, created on first publish. A subscriber
// to a pattern in another process finds a channel created before it
// subscribed at once, but one created later only at its next refresh, and
// may miss the messages published meanwhile. A program that knows its
// channels ahead (a worker serving an agent) creates them first. Brokers
// without such resources need not implement it.
type ChannelCreator interface {
	// CreateChannels creates the broker's resources for channels; it is
	// idempotent.
	CreateChannels(ctx context.Context, channels ...string) error
}

// CreateChannels creates channels on b if b is a [ChannelCreator], and
// does nothing otherwise.
func CreateChannels(ctx context.Context, b Broker, channels ...string) error {
	if cc, ok := b.(ChannelCreator); ok {
		return cc.CreateChannels(ctx, channels...)
	}
	return nil
}

// ChannelDeleter is implemented by brokers that keep a resource per
// channel (see [ChannelCreator]), or messages they can remove by channel,
// and can remove them. A [Client] deletes its inbox channel when it shuts
// down, so that the inboxes of clients that have ended do not pile up.
// Brokers without such resources need not implement it.
type ChannelDeleter interface {
	// DeleteChannels removes the broker's resources for channels, with the
	// messages they hold, or those messages where the channels have no
	// resource of their own. Deleting a channel that has none is not an
	// error.
	DeleteChannels(ctx context.Context, channels ...string) error
}

// DeleteChannels deletes channels on b if b is a [ChannelDeleter], and
// does nothing otherwise.
func DeleteChannels(ctx context.Context, b Broker, channels ...string) error {
	if cd, ok := b.(ChannelDeleter); ok {
		return cd.DeleteChannels(ctx, channels...)
	}
	return nil
}

// Local is implemented by brokers whose messages never leave the process
// that publishes them: every subscriber is in this process. The agent
// runtime then trusts the state it cached of a run, which no other
// process's handler writes, and reads the store only where its copy may
// be behind (see the agent package).
type Local interface {
	// Local reports whether every subscriber is in this process.
	Local() bool
}

// IsLocal reports whether b is a [Local] broker whose subscribers are all
// in this process, or wraps one: a broker with an Unwrap() Broker method
// (a wrapper that changes what is delivered, not where) is looked through.
func IsLocal(b Broker) bool {
	for b != nil {
		if l, ok := b.(Local); ok {
			return l.Local()
		}
		u, ok := b.(interface{ Unwrap() Broker })
		if !ok {
			return false
		}
		b = u.Unwrap()
	}
	return false
}

// GroupInspector is implemented by brokers that can tell whether a
// consumer group has live members: a caller that waits for a run of an
// agent asks it whether any process serves the agent, and reports at once
// when none does, instead of waiting for its timeout.
type GroupInspector interface {
	// GroupMembers returns how many live members the consumer group named
	// group has, or at least whether it has some: a result above zero may
	// be a lower bound. A group that does not exist has none.
	GroupMembers(ctx context.Context, group string) (int, error)
}

// GroupPreparer is implemented by brokers on which a consumer group
// receives only the messages published once the group exists (NATS, whose
// stream keeps a message only for the groups that exist when it is
// published). A caller that starts a run prepares the group of the
// agent's input channel first, so that a run sent before any worker has
// ever served the agent waits for the first one instead of being dropped.
type GroupPreparer interface {
	// PrepareGroup creates the consumer group named group on pattern, if
	// it does not exist, without joining it: the messages published from
	// then on wait for its members.
	PrepareGroup(ctx context.Context, pattern, group string) error
}

// PrepareGroup asks b, or the broker it wraps (see [IsLocal]), to create
// group on pattern if it is a [GroupPreparer]; on other brokers a group
// gets the messages published before it existed, or needs no preparing,
// and PrepareGroup does nothing.
func PrepareGroup(ctx context.Context, b Broker, pattern, group string) error {
	for b != nil {
		if gp, ok := b.(GroupPreparer); ok {
			return gp.PrepareGroup(ctx, pattern, group)
		}
		u, ok := b.(interface{ Unwrap() Broker })
		if !ok {
			return nil
		}
		b = u.Unwrap()
	}
	return nil
}

// GroupMembers asks b for the live members of group if b is a
// [GroupInspector]; known is false when b cannot tell.
func GroupMembers(ctx context.Context, b Broker, group string) (n int, known bool, err error) {
	gi, ok := b.(GroupInspector)
	if !ok {
		return 0, false, nil
	}
	n, err = gi.GroupMembers(ctx, group)
	return n, err == nil, err
}

// Subscription is an active subscription.
type Subscription interface {
	// Close stops delivery and waits for the handlers in progress to return.
	// Messages not yet handled stay unacknowledged: a durable broker
	// redelivers them to another member of the group.
	Close() error
}

// SubscribeOptions configures a subscription. A nil *SubscribeOptions means
// the defaults.
type SubscribeOptions struct {
	// Group is the consumer group. Subscribers that share a group share its
	// messages; the empty group gives this subscription a private group of
	// its own, so it sees every matching message.
	Group string
	// MaxAttempts bounds deliveries of one message before it is parked on
	// the dead-letter channel. Zero means the broker's default (5).
	MaxAttempts int
	// Concurrency bounds how many keys are handled at once. Zero means the
	// broker's default.
	Concurrency int
	// OutageBudget bounds how long a message whose handler fails with an
	// error of a service that cannot be reached ([IsUnavailable]) is
	// retried, without using up its attempts, before those failures count
	// as attempts. Zero means the broker's default
	// ([DefaultOutageBudget] unless the broker's options say otherwise); a
	// negative value counts them as attempts at once.
	OutageBudget time.Duration
}

// DefaultMaxAttempts is the number of deliveries of a failing message before
// it is dead-lettered, when neither the subscription nor the broker says
// otherwise.
const DefaultMaxAttempts = 5

// DefaultOutageBudget is how long, by default, a broker retries a message
// whose handler fails because a service cannot be reached
// ([IsUnavailable]) before those failures count as attempts: long enough
// for a database or a broker to restart or fail over, so that an ordinary
// outage parks nothing.
const DefaultOutageBudget = 5 * time.Minute

// DeadLetterChannel is the channel on which brokers park messages that
// failed their last attempt. Its payload is a [DeadLetter].
const DeadLetterChannel = "calf.deadletter"

// DeadLetter is the payload of a message on [DeadLetterChannel].
type DeadLetter struct {
	// Message is the message as it was published. When its data is not
	// valid JSON, Message.Data is empty and the bytes are in RawData.
	Message *Message `json:"message"`
	// RawData holds the original data when it is not valid JSON.
	RawData []byte `json:"raw_data,omitempty"`
	// Group is the consumer group that failed to handle it.
	Group string `json:"group,omitempty"`
	// Error is the last handler error.
	Error string `json:"error"`
	// Attempts is the number of deliveries made.
	Attempts int `json:"attempts"`
	// Permanent reports that the handler marked the error [Permanent].
	Permanent bool `json:"permanent,omitempty"`
	// Time is when the message was parked.
	Time time.Time `json:"time"`
}

// NewDeadLetterMessage builds the message that parks orig on
// [DeadLetterChannel]. Broker adapters use it so that every adapter parks
// messages the same way.
func NewDeadLetterMessage(orig *Message, group string, err error, attempts int, now time.Time) *Message {
	dl := DeadLetter{Message: orig, Group: group, Attempts: attempts, Permanent: IsPermanent(err), Time: now}
	if len(orig.Data) > 0 && !json.Valid(orig.Data) {
		c := orig.Clone()
		c.Data = nil
		dl.Message, dl.RawData = c, orig.Data
	}
	if err != nil {
		dl.Error = err.Error()
	}
	data, _ := json.Marshal(dl) // a Message always marshals
	md := orig.Metadata
	md.Attempt = 0
	md.CausationID = orig.ID
	md.Time = now
	md.Producer = ""
	return &Message{
		ID:       "deadletter." + group + "." + orig.ID,
		Channel:  DeadLetterChannel,
		Key:      orig.Key,
		Data:     data,
		Metadata: md,
	}
}

// ExponentialBackoff returns a backoff that waits first before the first
// redelivery and doubles the wait for each later one, up to limit. Each
// delay is drawn at random from its upper half, so that messages failing
// together are not retried together.
func ExponentialBackoff(first, limit time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := first
		for i := 1; i < attempt && d < limit; i++ {
			d *= 2
		}
		d = min(d, limit)
		if half := int64(d / 2); half > 0 {
			d = time.Duration(half + rand.Int64N(half+1))
		}
		return d
	}
}
