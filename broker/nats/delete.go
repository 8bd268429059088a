package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

var _ calf.ChannelDeleter = (*Broker)(nil)

// DeleteChannels removes the messages of channels from the stream; it
// implements [calf.ChannelDeleter]. The channels of the broker are
// subjects of its one stream, not resources of their own, so deleting a
// channel purges the stream of the messages on its subjects, in every
// partition: {Prefix}.*.{channel}, one purge request per channel. The
// filter matches the channel's subjects only: a subject token is never
// split, so purging a.b leaves the messages of a.b.c, a.bc and x.a.b. A
// [calf.Client] deletes its inbox this way when it shuts down, and a
// conversation host the channels of a conversation it stops.
//
// Every channel is checked with [calf.ValidateChannel] before anything is
// purged: an invalid name fails with an error matching
// [calf.ErrInvalidChannel] and purges nothing. A channel without messages
// is not an error. Each request is bounded by [Options.PublishTimeout];
// the first that fails ends the call, its error marked [calf.Unavailable]
// when the server could not be reached. It returns [calf.ErrClosed] once
// the broker is closed.
//
// Messages a member already holds (in progress, or waiting in their
// key's lane) are handled as usual: their acknowledgements find nothing
// left to remove, and the consumers forget them. One that is handed back
// (its member closing or giving the partition up) is not delivered
// again; older servers (2.9) count it outstanding for a while, so that a
// member taking its partition over at that moment waits for it at the
// takeover gate until the gate gives up (twice the ack wait and a
// second; see the package documentation), and newer ones forget it at
// the purge. A channel deleted stays usable: messages published on it
// afterwards are kept and delivered.
func (b *Broker) DeleteChannels(ctx context.Context, channels ...string) error {
	if b.closed.Load() {
		return calf.ErrClosed
	}
	for _, ch := range channels {
		if err := calf.ValidateChannel(ch); err != nil {
			return fmt.Errorf("nats: delete channel: %w", err)
		}
	}
	for _, ch := range channels {
		if err := b.purge(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}

// purge removes the messages of channel from the stream, in every
// partition.
func (b *Broker) purge(ctx context.Context, channel string) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.PublishTimeout)
	defer cancel()
	err := b.st.Purge(ctx, jetstream.WithPurgeSubject(channelFilter(b.opts.Prefix, channel)))
	switch {
	case err == nil, errors.Is(err, jetstream.ErrStreamNotFound):
		// Without the stream the channel holds no message.
		return nil
	case b.closed.Load():
		return calf.ErrClosed
	case publishOutage(err):
		return calf.Unavailable(fmt.Errorf("nats: delete channel %s: %w", channel, err))
	}
	return fmt.Errorf("nats: delete channel %s: %w", channel, err)
}

// channelFilter returns the subject filter of channel's subjects in every
// partition.
func channelFilter(prefix, channel string) string {
	return prefix + ".*." + channel
}
