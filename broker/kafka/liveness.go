package kafka

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MembersTopic is the topic, after [Options.TopicPrefix], on which brokers
// with consumer group subscriptions publish their liveness beats. No
// channel maps to it: a channel's topic never holds two dots in a row.
const MembersTopic = "calf..members"

// membersRetention is the retention.ms of the members topic: brokers read
// only the beats of the last few seconds.
const membersRetention = "60000"

// beat is a liveness record: the process whose broker published it is
// alive, and holds these group members.
type beat struct {
	// ID names the broker; it is random, new at each Open.
	ID string `json:"id"`
	// Members are the broker's consumer group members, by their current
	// member ids.
	Members []beatMember `json:"members,omitempty"`
	// Leaving is set on the last beat of a broker that closes.
	Leaving bool `json:"leaving,omitempty"`
}

type beatMember struct {
	Group  string `json:"group"`
	Member string `json:"member"`
}

// peer is what a broker knows of another one.
type peer struct {
	seen    time.Time // when its last beat arrived
	members []beatMember
}

// liveness publishes the broker's beats and watches the other brokers'.
// When a broker stops beating for [Options.FailoverAfter], the brokers
// that share a consumer group with it remove its members from the group,
// which rebalances at once: its partitions move to the live members
// without waiting for the group coordinator's session timeout, which a
// stock Kafka does not let go under 6 s.
type liveness struct {
	b     *Broker
	id    string
	topic string
	every time.Duration // between two beats
	after time.Duration // of silence before a peer is removed

	startOnce sync.Once
	cl        *kgo.Client // produces the beats and consumes the others'
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	// poked asks for a beat now: a member joined a group, and its peers
	// must know its member id before it holds partitions for long.
	poked chan struct{}

	mu    sync.Mutex
	peers map[string]*peer
	// selfSeen is when this broker last read back one of its own beats:
	// its view of the members topic is fresh.
	selfSeen time.Time
}

func newLiveness(b *Broker) *liveness {
	return &liveness{
		b:     b,
		id:    rand.Text(),
		topic: b.opts.TopicPrefix + MembersTopic,
		after: b.opts.FailoverAfter,
		every: max(b.opts.FailoverAfter/8, 10*time.Millisecond),
		peers: map[string]*peer{},
		poked: make(chan struct{}, 1),
	}
}

// poke asks for a beat now.
func (l *liveness) poke() {
	select {
	case l.poked <- struct{}{}:
	default:
	}
}

// start creates the members topic and starts beating and watching, once.
// It does nothing when failover is off. A broker that can neither create
// nor find the members topic (on a cluster where topics are made
// beforehand) logs a warning and goes without: its members' partitions
// move after the session timeout.
func (l *liveness) start(ctx context.Context) {
	if l.after <= 0 {
		return
	}
	l.startOnce.Do(func() {
		if err := l.b.ensureTopic(ctx, l.topic); err != nil {
			l.b.log.Warn("kafka: no liveness beats, so a crashed member's partitions move only after the session timeout", "topic", l.topic, "error", err)
			return
		}
		// Beats of the last two silences tell of the peers that were
		// alive before this broker came.
		from := kgo.NewOffset().AfterMilli(time.Now().Add(-2 * l.after).UnixMilli())
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(l.b.seeds...),
			kgo.ClientID("calf"),
			kgo.ProducerLinger(0),
			kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.DisableIdempotentWrite(),
			kgo.FetchMaxWait(l.every),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.topic: {0: from}}),
			kgo.WithLogger(kgoLogger{l.b.log}),
		}, l.b.opts.ClientOptions...)...)
		if err != nil {
			l.b.log.Warn("kafka: no liveness beats, so a crashed member's partitions move only after the session timeout", "error", err)
			return
		}
		l.cl = cl
		l.ctx, l.cancel = context.WithCancel(context.Background())
		l.wg.Go(l.watch)
		l.wg.Go(l.beatLoop)
	})
}

// watch records the beats of the other brokers.
func (l *liveness) watch() {
	for {
		fs := l.cl.PollFetches(l.ctx)
		if l.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			var bt beat
			if err := json.Unmarshal(r.Value, &bt); err != nil || bt.ID == "" {
				return
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if bt.ID == l.id {
				l.selfSeen = now
				return
			}
			if bt.Leaving {
				delete(l.peers, bt.ID)
				return
			}
			l.peers[bt.ID] = &peer{seen: now, members: bt.Members}
		})
	}
}

// beatLoop publishes a beat every l.every, and removes the members of the
// peers that have been silent for l.after.
func (l *liveness) beatLoop() {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.beat(false)
		l.evictSilent()
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.poked:
		}
	}
}

// beat publishes a beat listing the broker's group members, without
// waiting for it to be written unless leaving.
func (l *liveness) beat(leaving bool) {
	bt := beat{ID: l.id, Leaving: leaving}
	if !leaving {
		bt.Members = l.b.members()
	}
	data, err := json.Marshal(bt)
	if err != nil {
		return
	}
	rec := &kgo.Record{Topic: l.topic, Key: []byte(l.id), Value: data}
	if !leaving {
		l.cl.Produce(l.ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				l.b.log.Debug("kafka: liveness beat", "error", err)
			}
		})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.after)
	defer cancel()
	if err := l.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		l.b.log.Debug("kafka: last liveness beat", "error", err)
	}
}

// evictSilent removes from the groups this broker belongs to the members
// of the peers silent for l.after.
func (l *liveness) evictSilent() {
	now := time.Now()
	var silent []*peer
	l.mu.Lock()
	if now.Sub(l.selfSeen) > max(4*l.every, time.Second) {
		// This broker has not read back its own beats lately (it was
		// paused, or the cluster is slow or unreachable): its view of the
		// peers is stale, and their silence proves nothing.
		l.mu.Unlock()
		return
	}
	for id, p := range l.peers {
		if now.Sub(p.seen) >= l.after {
			delete(l.peers, id)
			silent = append(silent, p)
		}
	}
	l.mu.Unlock()
	if len(silent) == 0 {
		return
	}
	mine := map[string]bool{}
	for _, m := range l.b.members() {
		mine[m.Group] = true
	}
	for _, p := range silent {
		for _, m := range p.members {
			if mine[m.Group] {
				l.evict(m)
			}
		}
	}
}

// evict asks the group coordinator to remove a member from its group.
// Another broker may have removed it already, or the member may have
// rejoined under a new id: the coordinator then no longer knows it.
func (l *liveness) evict(m beatMember) {
	ctx, cancel := context.WithTimeout(l.ctx, l.after)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.Group
	mem := kmsg.NewLeaveGroupRequestMember()
	mem.MemberID = m.Member
	reason := "calf: the member's process stopped its liveness beats"
	mem.Reason = &reason
	req.Members = append(req.Members, mem)
	resp, err := req.RequestWith(ctx, l.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && len(resp.Members) > 0 {
		err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
	}
	switch {
	case err == nil:
		l.b.log.Info("kafka: removed a silent member from its group", "group", m.Group, "member", m.Member)
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, context.Canceled):
	default:
		l.b.log.Warn("kafka: remove a silent member from its group", "group", m.Group, "member", m.Member, "error", err)
	}
}

// stop ends the beats. A broker that closes publishes a last beat saying
// so; one that crashes does not.
func (l *liveness) stop(leaving bool) {
	// No start after stop; wait for one in progress.
	l.startOnce.Do(func() {})
	if l.cl == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
	if leaving {
		l.beat(true)
	}
	l.cl.Close()
}

// members returns the broker's consumer group members that have joined.
func (b *Broker) members() []beatMember {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ms []beatMember
	for s := range b.subs {
		if s.private || s.cl == nil {
			continue
		}
		if id, _ := s.cl.GroupMetadata(); id != "" {
			ms = append(ms, beatMember{Group: s.group, Member: id})
		}
	}
	return ms
}
