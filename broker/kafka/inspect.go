package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/calf-go/calf"
)

var _ calf.GroupInspector = (*Broker)(nil)

// GroupMembers returns the number of members of the Kafka consumer group
// group, as the cluster describes it; it implements
// [calf.GroupInspector]. A group the cluster does not know, or that is
// empty or dead, has none. The member of a crashed process stays counted
// until its session times out or a live broker evicts it (see the
// package documentation on liveness).
func (b *Broker) GroupMembers(ctx context.Context, group string) (int, error) {
	if b.closed.Load() {
		return 0, calf.ErrClosed
	}
	groups, err := b.adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, fmt.Errorf("kafka: describe group %s: %w", group, err)
	}
	g, ok := groups[group]
	if !ok {
		return 0, nil
	}
	if g.Err != nil {
		if errors.Is(g.Err, kerr.GroupIDNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("kafka: describe group %s: %w", group, g.Err)
	}
	switch g.State {
	case "Empty", "Dead", "":
		return 0, nil
	}
	return len(g.Members), nil
}

var _ calf.GroupPreparer = (*Broker)(nil)

// PrepareGroup positions the consumer group group of pattern, if Kafka has
// no committed offsets for it, at the end of the pattern's topics (creating
// the topic of a pattern without wildcards), without joining it; it
// implements [calf.GroupPreparer]. A new group starts at the end of the
// topics that exist when its first member subscribes: once prepared, it
// gets every message published from then on, those sent before its first
// member subscribed included. A group with committed offsets keeps them.
func (b *Broker) PrepareGroup(ctx context.Context, pattern, group string) error {
	topics, err := matcher(b.opts.TopicPrefix, pattern)
	if err != nil {
		return err
	}
	if group == "" {
		return errors.New("kafka: prepare a group without a name")
	}
	if b.closed.Load() {
		return calf.ErrClosed
	}
	if topics.re == nil {
		if err := b.ensureTopic(ctx, topics.topic); err != nil {
			return err
		}
	}
	// A group with members has its position, or is taking it: committing
	// offsets from outside could move it past messages a member has yet
	// to commit.
	if n, err := b.GroupMembers(ctx, group); err != nil || n > 0 {
		return err
	}
	s := &subscription{b: b, pattern: pattern, topics: topics, group: group}
	return s.position(ctx)
}
