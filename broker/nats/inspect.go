package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

var (
	_ calf.GroupInspector = (*Broker)(nil)
	_ calf.GroupPreparer  = (*Broker)(nil)
)

// GroupMembers returns how many live members the consumer group group
// has; it implements [calf.GroupInspector]. Every member of a named group
// announces itself in the broker's bucket of leases, renewing its
// announcement several times a lease time and withdrawing it when it
// closes, so the members counted are those that announced themselves
// within the lease time (2 seconds by default): a member that crashed
// stops counting when its announcement expires, and a partition moving
// from a crashed member to a live one does not make the group look empty.
// A group some of whose partitions have no consumer yet has none: a
// message for such a partition would be missed. No announcement is taken
// for no member only once the bucket of leases has had its leader for
// twice the lease time and this broker's connection has not come back
// from a lost server within that time: while a cluster elects the
// bucket's new leader, or a single server restarts, the members cannot
// renew their announcements, which expire, so until they have announced
// themselves again the answer is an error marked [calf.Unavailable], not
// zero. The call is
// bounded by [Options.PublishTimeout]; when the server does not answer in
// that time the error is marked [calf.Unavailable].
func (b *Broker) GroupMembers(ctx context.Context, group string) (int, error) {
	if b.closed.Load() {
		return 0, calf.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.PublishTimeout)
	defer cancel()
	pulled := false // a consumer of the group has a member's pull requests waiting
	for p := range b.opts.Partitions {
		cons, err := b.js.Consumer(ctx, b.opts.Stream, ConsumerName(group, p))
		if errors.Is(err, jetstream.ErrConsumerNotFound) && p > 0 {
			// The others exist: a server that has just become the
			// cluster's leader may not know every consumer yet.
			return 0, calf.Unavailable(fmt.Errorf("nats: consumer %d of group %s not found, those before it found", p, group))
		}
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// Never subscribed, or a member is still creating the
			// consumers: a message for this partition would be missed.
			return 0, nil
		}
		if err != nil {
			return 0, calf.Unavailable(fmt.Errorf("nats: consumer of group %s: %w", group, err))
		}
		pulled = pulled || cons.CachedInfo().NumWaiting > 0
	}
	kv, err := b.leaseBucket(ctx)
	if err != nil {
		return 0, calf.Unavailable(err)
	}
	members, err := listMembers(ctx, kv, leasePrefix(group))
	if err != nil {
		return 0, calf.Unavailable(fmt.Errorf("nats: members of group %s: %w", group, err))
	}
	if len(members) == 0 && pulled {
		// Announcements lost (expired while no member could renew them)
		// while a member still pulls: the next renewals bring them back.
		return 0, calf.Unavailable(fmt.Errorf("nats: group %s: no member announced, yet its consumers are pulled", group))
	}
	if len(members) == 0 {
		if err := b.leasesSettled(ctx); err != nil {
			return 0, calf.Unavailable(fmt.Errorf("nats: members of group %s: %w", group, err))
		}
	}
	return len(members), nil
}

// errLeasesUnsettled reports a bucket of leases whose leader changed too
// recently for the absence of an announcement to mean anything.
var errLeasesUnsettled = errors.New("the bucket of leases has just changed leader; its members may not have announced themselves again yet")

// leasesSettled returns nil when the bucket of leases has had its leader
// for longer than twice the lease time, so that a group without
// announcements in it has no live member. On a cluster, electing a new
// leader after its node died takes longer than an announcement lasts:
// the members cannot renew theirs meanwhile, they expire, and the group
// looks empty until the members' next renewals, a moment after the
// election. A single server that restarts does the same to every member,
// with no leader to show it: the broker's own connection coming back
// within twice the lease time counts as unsettled too.
func (b *Broker) leasesSettled(ctx context.Context) error {
	st, err := b.js.Stream(ctx, "KV_"+b.opts.Stream+"_leases")
	if err != nil {
		return fmt.Errorf("nats: bucket of leases: %w", err)
	}
	settle := 2 * leaseTTL(b.opts.AckWait)
	if at := b.reconnected.Load(); at != 0 && time.Since(time.Unix(0, at)) < settle {
		// The server this connection had went away: if it restarted, every
		// member lost it too, and their announcements expired meanwhile.
		return fmt.Errorf("%w (this connection came back %s ago)", errLeasesUnsettled, time.Since(time.Unix(0, at)).Round(time.Millisecond))
	}
	ci := st.CachedInfo().Cluster
	switch {
	case ci == nil:
		return nil
	case ci.Leader == "":
		return fmt.Errorf("%w (no leader)", errLeasesUnsettled)
	case ci.LeaderSince != nil && time.Since(*ci.LeaderSince) < settle:
		return fmt.Errorf("%w (leader %s since %s)", errLeasesUnsettled, ci.Leader, ci.LeaderSince.Format(time.RFC3339Nano))
	}
	return nil
}

// PrepareGroup creates the consumers of the named group group on pattern,
// those that do not exist, without joining the group; it implements
// [calf.GroupPreparer]. The stream keeps a message only for the groups
// that exist when it is published: once prepared, a group keeps the
// messages published to it until a member handles them, those sent before
// its first member subscribed included. A consumer that exists is left as
// it is (its members set its configuration). PrepareGroup fails with
// [ErrGroupPattern] when the group exists with another pattern; the call
// is bounded by [Options.PublishTimeout], and a server that does not
// answer in that time makes it fail with an error matching
// [calf.ErrUnavailable].
func (b *Broker) PrepareGroup(ctx context.Context, pattern, group string) error {
	if err := calf.ValidatePattern(pattern); err != nil {
		return err
	}
	if group == "" {
		return errors.New("nats: prepare a group without a name")
	}
	if b.closed.Load() {
		return calf.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.PublishTimeout)
	defer cancel()
	s := &subscription{b: b, pattern: pattern, group: group, window: b.opts.Window,
		run: delivery.Runner{Policy: delivery.Policy{MaxAttempts: b.opts.MaxAttempts}}}
	errs := make([]error, b.opts.Partitions)
	var wg sync.WaitGroup
	for p := range b.opts.Partitions {
		wg.Go(func() { errs[p] = s.prepare(ctx, s.consumerConfig(p)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first; the others are most likely the same
		}
	}
	return nil
}
