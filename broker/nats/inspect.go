package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

var _ calf.GroupInspector = (*Broker)(nil)

// GroupMembers reports whether the consumer group group has live members;
// it implements [calf.GroupInspector]. A live member keeps pull requests
// waiting at the server on the partitions it consumes, so the group has
// some once the consumers of all its partitions exist and one of them has
// a request waiting or a message in progress; the result is then 1, a
// lower bound, since the server does not say whose the requests are. A member that went away
// stops counting once its pull requests expire (within 5 seconds).
func (b *Broker) GroupMembers(ctx context.Context, group string) (int, error) {
	if b.closed.Load() {
		return 0, calf.ErrClosed
	}
	live := false
	for p := range b.opts.Partitions {
		c, err := b.js.Consumer(ctx, b.opts.Stream, consumerName(group, p))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// Never subscribed, or a member is still creating the
			// consumers: a message for this partition would be missed.
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("nats: consumer of group %s: %w", group, err)
		}
		info := c.CachedInfo()
		live = live || info.NumWaiting > 0 || info.NumAckPending > 0
	}
	if live {
		return 1, nil
	}
	return 0, nil
}
