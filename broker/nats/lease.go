package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

// leaser keeps the leases of one member of a named group on the partitions
// it consumes, in the key-value bucket of the broker's stream. Each member
// announces itself with a key that expires unless renewed; every member
// reads the list of live members, sorted, keeps the partitions it holds
// up to its share and claims free ones up to it (see tick); a partition's
// lease is a key created only if absent, renewed by its holder, and
// deleted by it once it has handed the partition's messages back when the
// partition is over its share. A member that stops renewing (a crash)
// loses its leases when they expire.
type leaser struct {
	s      *subscription
	kv     jetstream.KeyValue
	id     string
	prefix string // the group's keys: prefix+"m."+member, prefix+"p."+partition
	every  time.Duration

	// roster follows the members' announcements (see members); nil until
	// the first tick, and again after its watch has failed.
	rmu    sync.Mutex
	roster *roster

	mu     sync.Mutex
	owned  map[int]*held // by partition
	done   chan struct{} // closed to stop the ticks
	exited chan struct{} // closed once the last tick has returned
	once   sync.Once
}

// held is a lease the member holds.
type held struct {
	rev     uint64        // the revision of its key
	drained chan struct{} // set while the partition is given up; closed once it is
}

// leaseTTL is how long a lease, or a member's announcement, lasts without
// renewal: the ack wait, after which a crashed holder's messages come
// back too (the next owner waits for them anyway), and at least 2 s, so
// that a live member misses several renewals before it loses a lease.
func leaseTTL(ackWait time.Duration) time.Duration {
	return max(ackWait, 2*time.Second)
}

// leaseBucket returns the broker's key-value bucket of leases, creating it.
func (b *Broker) leaseBucket(ctx context.Context) (jetstream.KeyValue, error) {
	b.leaseMu.Lock()
	defer b.leaseMu.Unlock()
	if b.leases != nil {
		return b.leases, nil
	}
	kv, err := ensureBucket(ctx, b.js, jetstream.KeyValueConfig{
		Bucket:      b.opts.Stream + "_leases",
		Description: "calf: leases of consumer group members on partitions",
		TTL:         leaseTTL(b.opts.AckWait),
		History:     1,
		Replicas:    b.opts.Replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: lease bucket: %w", err)
	}
	b.leases = kv
	return kv, nil
}

func newLeaser(ctx context.Context, s *subscription) (*leaser, error) {
	kv, err := s.b.leaseBucket(ctx)
	if err != nil {
		return nil, err
	}
	l := &leaser{
		s: s, kv: kv, id: calf.NewID(),
		prefix: leasePrefix(s.group),
		every:  leaseTTL(s.b.opts.AckWait) / 6,
		owned:  map[int]*held{},
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	// Announce the member at once, so that the others make room for it.
	if _, err := kv.Put(ctx, l.prefix+"m."+l.id, nil); err != nil {
		return nil, fmt.Errorf("nats: group %s: announce member: %w", s.group, err)
	}
	return l, nil
}

// run renews the leases and claims or gives up partitions until stop.
func (l *leaser) run() {
	defer close(l.exited)
	defer func() {
		l.rmu.Lock()
		defer l.rmu.Unlock()
		if l.roster != nil {
			l.roster.stop()
			l.roster = nil
		}
	}()
	// The first tick came before Subscribe returned (see start), so that
	// a member consumes its partitions as soon as it has joined: messages
	// sent to a group whose only member has just started wait for
	// nothing. Members that start together may each claim more than their
	// share at first; the next ticks hand the extra partitions over.
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-l.done:
			return
		}
		l.tick()
	}
}

func (l *leaser) stop() { l.once.Do(func() { close(l.done) }) }

// wait waits until the tick in progress, if any, has returned: after
// stop, and after the member's context is cancelled, which ends its
// calls to the server.
func (l *leaser) wait() { <-l.exited }

func (l *leaser) key(p int) string { return l.prefix + "p." + strconv.Itoa(p) }

// tick announces the member, and claims, renews or gives up each
// partition according to its place among the members.
func (l *leaser) tick() {
	s := l.s
	ctx, cancel := context.WithTimeout(s.ctx, l.every*2)
	defer cancel()
	rev, err := l.kv.Put(ctx, l.prefix+"m."+l.id, nil)
	if err != nil {
		s.b.log.Debug("nats: announce member", "group", s.group, "error", err)
		return
	}
	members, err := l.members(ctx, rev)
	if err != nil {
		s.b.log.Debug("nats: list members", "group", s.group, "error", err)
		return
	}
	i, n := slices.Index(members, l.id), len(members)
	if i < 0 {
		return // our announcement expired meanwhile: the next tick puts it back
	}
	// The member's share: P/n partitions, one more for the first P mod n
	// members. It keeps the partitions it holds up to its share, gives
	// up the rest (the highest), and claims free ones until it has its
	// share: a partition moves only when its holder dies or holds more
	// than its share, so that a member that joins or dies moves the
	// fewest partitions (a partition that moves hands back the messages
	// waiting in it, and its next holder waits for those in progress).
	parts := s.b.opts.Partitions
	share := parts / n
	if i < parts%n {
		share++
	}
	l.mu.Lock()
	var mine []int
	for p, h := range l.owned {
		if h.drained == nil {
			mine = append(mine, p)
		}
	}
	l.mu.Unlock()
	slices.Sort(mine)
	extra := map[int]bool{}
	for _, p := range mine[min(share, len(mine)):] {
		extra[p] = true
	}
	for p := range parts {
		select {
		case <-l.done:
			return
		default:
		}
		l.mu.Lock()
		h := l.owned[p]
		l.mu.Unlock()
		switch {
		case h == nil:
		case h.drained != nil:
			select {
			case <-h.drained:
				// Given up, its messages back at the server: let go.
				l.release(ctx, p, h.rev)
				continue
			default:
			}
			l.renew(ctx, p, h, false) // still draining: keep the lease meanwhile
		default:
			l.renew(ctx, p, h, extra[p])
		}
		if s.ctx.Err() != nil {
			return // the member stops: releaseAll lets go of its leases
		}
	}
	need := share - (len(mine) - len(extra))
	if need <= 0 {
		return
	}
	claims, err := l.free(ctx, i*parts/n, need)
	if err != nil {
		s.b.log.Debug("nats: list leases", "group", s.group, "error", err)
		return
	}
	// The partitions to claim are claimed at once, not one after the
	// other: a member that joins serves its share a few round trips
	// later, whatever the number of partitions.
	var wg sync.WaitGroup
	for _, p := range claims {
		wg.Go(func() { l.claim(ctx, p) })
	}
	wg.Wait()
}

// renew renews the lease on p, which the member holds as h, and starts
// giving the partition up if giveUp is set: once the handlers in progress
// have finished, a later tick lets go of the lease. A lease found lost
// (another member holds it now) stops the partition at once.
func (l *leaser) renew(ctx context.Context, p int, h *held, giveUp bool) {
	s := l.s
	next, err := l.kv.Update(ctx, l.key(p), []byte(l.id), h.rev)
	if err != nil && s.ctx.Err() != nil {
		return
	}
	if err != nil {
		s.b.log.Warn("nats: lost the lease on a partition", "group", s.group, "partition", p, "error", err)
		l.forget(p)
		go s.giveUp(p)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h.rev = next
	if giveUp && h.drained == nil {
		drained := make(chan struct{})
		h.drained = drained
		go func() {
			s.giveUp(p)
			close(drained)
		}()
	}
}

// free returns up to n partitions that no member holds, the search
// starting at partition from (members start at different places, so that
// they seldom race for the same partition).
func (l *leaser) free(ctx context.Context, from, n int) ([]int, error) {
	lister, err := l.kv.ListKeysFiltered(ctx, l.prefix+"p.*")
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for k := range lister.Keys() {
		held[k] = true
	}
	_ = lister.Stop() // fails once the listing has ended by itself
	parts := l.s.b.opts.Partitions
	var out []int
	for k := range parts {
		p := (from + k) % parts
		if len(out) == n {
			break
		}
		if !held[l.key(p)] {
			out = append(out, p)
		}
	}
	return out, nil
}

// claim takes the lease on partition p, if no member holds it, and
// consumes the partition.
func (l *leaser) claim(ctx context.Context, p int) {
	s := l.s
	rev, err := l.kv.Create(ctx, l.key(p), []byte(l.id))
	if err != nil {
		return // held by a member that has not given it up yet
	}
	// Looked up once the lease is held: its cached information tells what
	// the previous holder left outstanding (see consume).
	cons, err := s.b.js.Consumer(ctx, s.b.opts.Stream, ConsumerName(s.group, p))
	started := false
	if err == nil {
		started, err = s.consume(ctx, p, cons, true)
	}
	if err != nil && s.ctx.Err() == nil {
		s.b.log.Warn("nats: consume a leased partition", "group", s.group, "partition", p, "error", err)
	}
	if !started {
		l.release(ctx, p, rev)
		return
	}
	l.mu.Lock()
	l.owned[p] = &held{rev: rev}
	l.mu.Unlock()
}

// leasePrefix returns the prefix of the keys of group in the bucket of
// leases: prefix+"m."+member, prefix+"p."+partition.
func leasePrefix(group string) string {
	sum := sha256.Sum256([]byte(group))
	return "g" + hex.EncodeToString(sum[:8]) + "."
}

// members returns the ids of the group's live members, sorted: those
// whose announcement is at most staleAfter older than this member's,
// which it has just renewed at revision rev. A member renews its
// announcement every tick; one that has missed three renewals has most
// likely died, and the partitions it would be given are left to the
// others at once, not when its announcement expires a lease TTL after its
// death: a partition whose lease expires is taken over by a live member,
// even when another member died shortly before. The ages are those the
// server stamped, so that the members' clocks do not matter.
//
// The announcements come from the member's roster, a watch of the
// group's announcement keys, once it has seen revision rev (and so every
// announcement before it): a tick then costs no request. Should the watch
// not catch up within a tick, or have failed, the member lists and reads
// the announcements instead, and starts a new watch on the next tick.
func (l *leaser) members(ctx context.Context, rev uint64) ([]string, error) {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.roster == nil {
		r, err := watchRoster(l.s.ctx, l.kv, l.prefix)
		if err != nil {
			l.s.b.log.Debug("nats: watch members", "group", l.s.group, "error", err)
		} else {
			l.roster = r
		}
	}
	if r := l.roster; r != nil {
		wctx, cancel := context.WithTimeout(ctx, l.every)
		stamps, err := r.since(wctx, rev)
		cancel()
		if err == nil {
			return l.live(stamps), nil
		}
		l.s.b.log.Debug("nats: watch members", "group", l.s.group, "error", err)
		r.stop()
		l.roster = nil
	}
	stamps, err := readMembers(ctx, l.kv, l.prefix)
	if err != nil {
		return nil, err
	}
	return l.live(stamps), nil
}

// live returns, sorted, the members of stamps (the server's stamps of
// their latest announcements) that are this member or whose announcement
// is at most staleAfter older than this member's.
func (l *leaser) live(stamps map[string]time.Time) []string {
	mine, ok := stamps[l.id]
	var ids []string
	for id, at := range stamps {
		if id == l.id || (ok && mine.Sub(at) <= l.staleAfter()) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// readMembers lists the announcements under prefix and reads each: the
// server's stamp of each member's latest announcement.
func readMembers(ctx context.Context, kv jetstream.KeyValue, prefix string) (map[string]time.Time, error) {
	ids, err := listMembers(ctx, kv, prefix)
	if err != nil {
		return nil, err
	}
	stamps := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		e, err := kv.Get(ctx, prefix+"m."+id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, err
		}
		stamps[id] = e.Created()
	}
	return stamps, nil
}

// roster follows the announcements of a group's members through one
// watch of their keys, kept for the member's life, in place of a listing
// and a read per member on every tick (a listing is a consumer the server
// creates and deletes).
type roster struct {
	w jetstream.KeyWatcher

	mu      sync.Mutex
	stamps  map[string]time.Time // member → the server's stamp of its latest announcement
	rev     uint64               // the latest revision seen
	failed  bool                 // the watch has ended
	changed chan struct{}        // closed, and replaced, at each update
}

func watchRoster(ctx context.Context, kv jetstream.KeyValue, prefix string) (*roster, error) {
	w, err := kv.Watch(ctx, prefix+"m.*", jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	r := &roster{w: w, stamps: map[string]time.Time{}, changed: make(chan struct{})}
	go r.follow(prefix + "m.")
	return r, nil
}

// follow applies the watch's updates until it ends.
func (r *roster) follow(prefix string) {
	for e := range r.w.Updates() {
		if e == nil {
			continue // the initial values have all come
		}
		r.mu.Lock()
		id := strings.TrimPrefix(e.Key(), prefix)
		if e.Operation() == jetstream.KeyValuePut {
			r.stamps[id] = e.Created()
		} else {
			delete(r.stamps, id)
		}
		r.rev = max(r.rev, e.Revision())
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.failed = true
	close(r.changed)
	r.mu.Unlock()
}

// errRosterEnded reports a roster whose watch has ended.
var errRosterEnded = errors.New("the watch of the members ended")

// since returns the stamps of the announcements once the roster has seen
// revision rev. Announcements that expired (a member that died) are left
// out once they are older than the newest by more than a minute; callers
// leave out those that are stale anyway.
func (r *roster) since(ctx context.Context, rev uint64) (map[string]time.Time, error) {
	for {
		r.mu.Lock()
		if r.failed {
			r.mu.Unlock()
			return nil, errRosterEnded
		}
		if r.rev >= rev {
			var newest time.Time
			for _, at := range r.stamps {
				if at.After(newest) {
					newest = at
				}
			}
			out := make(map[string]time.Time, len(r.stamps))
			for id, at := range r.stamps {
				if newest.Sub(at) > time.Minute {
					delete(r.stamps, id)
					continue
				}
				out[id] = at
			}
			r.mu.Unlock()
			return out, nil
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("the watch of the members did not reach revision %d: %w", rev, context.Cause(ctx))
		}
	}
}

func (r *roster) stop() { _ = r.w.Stop() }

// staleAfter is how much older than this member's announcement another
// member's may be before it counts as dead: three renewals missed.
func (l *leaser) staleAfter() time.Duration { return 3 * l.every }

// listMembers returns the ids of the members announced in kv under prefix,
// sorted.
func listMembers(ctx context.Context, kv jetstream.KeyValue, prefix string) ([]string, error) {
	lister, err := kv.ListKeysFiltered(ctx, prefix+"m.*")
	if err != nil {
		return nil, err
	}
	var ids []string
	for k := range lister.Keys() {
		ids = append(ids, strings.TrimPrefix(k, prefix+"m."))
	}
	_ = lister.Stop() // fails once the listing has ended by itself
	slices.Sort(ids)
	return ids, nil
}

func (l *leaser) forget(p int) {
	l.mu.Lock()
	delete(l.owned, p)
	l.mu.Unlock()
}

// release deletes the lease on p, which the member no longer consumes.
func (l *leaser) release(ctx context.Context, p int, rev uint64) {
	l.forget(p)
	// Released even when the member is stopping (ctx cancelled): a lease
	// left behind keeps the partition from the next owner until it expires.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	l.delete(ctx, p, rev)
}

// delete deletes the member's lease on p, whose key had revision rev. Should
// the key have another revision (a renewal that reached the server after
// its caller gave up on it), the key is deleted if it still names the
// member.
func (l *leaser) delete(ctx context.Context, p int, rev uint64) {
	err := l.kv.Delete(ctx, l.key(p), jetstream.LastRevision(rev))
	if err != nil {
		if e, gerr := l.kv.Get(ctx, l.key(p)); gerr == nil && string(e.Value()) == l.id {
			err = l.kv.Delete(ctx, l.key(p), jetstream.LastRevision(e.Revision()))
		}
	}
	if err != nil {
		l.s.b.log.Debug("nats: release a lease", "group", l.s.group, "partition", p, "error", err)
	}
}

// releaseAll deletes every lease of the member and its announcement, once
// its partitions are given up, so that the others take them over at once.
func (l *leaser) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The caller has waited for the last tick, so no lease changes
	// meanwhile.
	l.mu.Lock()
	revs := make(map[int]uint64, len(l.owned))
	for p, h := range l.owned {
		revs[p] = h.rev
	}
	l.owned = map[int]*held{}
	l.mu.Unlock()
	if l.s.b.nc.IsClosed() {
		return
	}
	for p, rev := range revs {
		l.delete(ctx, p, rev)
	}
	if err := l.kv.Delete(ctx, l.prefix+"m."+l.id); err != nil {
		l.s.b.log.Debug("nats: withdraw member", "group", l.s.group, "error", err)
	}
}
