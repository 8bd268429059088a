package timers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// Store kinds of the timers' records.
const (
	// KindTimer holds one timer, under its id.
	KindTimer = "timer"
	// KindDue is the index of the timers by due time: the id of an entry
	// is the due time (nanoseconds since 1970, 19 digits) and the timer's
	// id, "{due}/{id}", so that a store's List gives the earliest first.
	// An entry's data is the lease of the process firing it, if any.
	KindDue = "timer_due"
)

// Defaults of [Options].
const (
	DefaultPoll  = time.Second
	DefaultLease = 5 * time.Second
	DefaultPage  = 256
)

// maxIDLen bounds a timer's id so that its index entry fits a store key.
const maxIDLen = store.MaxKeyLen - 20

// ErrInvalid is matched by the error of [Service.Start] for a timer that
// cannot be kept: no id, an id too long, no channel, no due time.
var ErrInvalid = errors.New("timers: invalid timer")

// Timer is one durable timer: at Due, an event is emitted on Channel.
type Timer struct {
	// ID names the timer; starting a timer of an id that exists changes
	// nothing, so that a caller that may repeat itself (a redelivered
	// message) starts it once.
	ID string `json:"id"`
	// Due is when the event is emitted.
	Due time.Time `json:"due"`
	// Channel, Data, Key and Metadata are those of the event emitted.
	Channel  string          `json:"channel"`
	Data     json.RawMessage `json:"data,omitempty"`
	Key      string          `json:"key,omitempty"`
	Metadata calf.Metadata   `json:"metadata,omitzero"`
	// EventID is the id of the event emitted: the same at each firing, so
	// that a timer fired twice (its first firer died before recording that
	// it fired) is one event to whoever deduplicates by id. Default: ID.
	EventID string `json:"event_id,omitempty"`
	// Created is when the timer was started.
	Created time.Time `json:"created"`
}

// lease is what an index entry holds while a process fires its timer.
type lease struct {
	Owner string    `json:"owner,omitempty"`
	Until time.Time `json:"until,omitzero"`
}

// Options configure a [Service].
type Options struct {
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Poll bounds the time between two reads of the index while nothing
	// is due sooner: a timer started by another process is fired at most
	// Poll late. Default: [DefaultPoll].
	Poll time.Duration
	// Lease is how long a process holds a timer it fires before another
	// may fire it in its place: the lateness of a timer whose firer died.
	// Default: [DefaultLease].
	Lease time.Duration
	// Page is how many index entries a pass reads at a time, and so how
	// many due timers it takes together (their leases, reads and
	// removals sent at once). Default: [DefaultPage].
	Page int
	// Owner names this process in its leases. Default: a new id.
	Owner string
	// Logger receives the firing loop's diagnostics. Default: the
	// client's.
	Logger *slog.Logger
}

// Service keeps timers in a store and fires them through a client.
type Service struct {
	store  store.Store
	client *calf.Client
	now    func() time.Time
	poll   time.Duration
	lease  time.Duration
	page   int
	owner  string
	log    *slog.Logger
	wake   chan struct{}

	runMu   sync.Mutex
	running bool
}

// New returns a service that keeps its timers in s and emits their events
// through c.
func New(s store.Store, c *calf.Client, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Page <= 0 {
		o.Page = DefaultPage
	}
	if o.Owner == "" {
		o.Owner = calf.NewID()
	}
	if o.Logger == nil {
		o.Logger = c.Logger()
	}
	return &Service{store: s, client: c, now: o.Now, poll: o.Poll, lease: o.Lease, page: o.Page, owner: o.Owner, log: o.Logger, wake: make(chan struct{}, 1)}
}

// dueID returns the index entry's id of a timer.
func dueID(due time.Time, id string) string {
	return fmt.Sprintf("%019d/%s", max(due.UnixNano(), 0), id)
}

// parseDue splits an index entry's id.
func parseDue(s string) (time.Time, string, bool) {
	n, id, ok := strings.Cut(s, "/")
	if !ok {
		return time.Time{}, "", false
	}
	ns, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, ns), id, true
}

// Start keeps t until it is due, and reports whether it was new: a timer
// of t.ID that exists already is left as it is. The index entry is
// written first, so that a timer is never kept without one; an entry
// left by a start that failed halfway is removed by the firing loop.
func (s *Service) Start(ctx context.Context, t Timer) (bool, error) {
	switch {
	case t.ID == "" || len(t.ID) > maxIDLen:
		return false, fmt.Errorf("%w: the id must have 1 to %d bytes", ErrInvalid, maxIDLen)
	case t.Channel == "":
		return false, fmt.Errorf("%w %s: no channel", ErrInvalid, t.ID)
	case t.Due.IsZero():
		return false, fmt.Errorf("%w %s: no due time", ErrInvalid, t.ID)
	}
	if t.Created.IsZero() {
		t.Created = s.now()
	}
	t.Due = t.Due.Round(0).UTC()
	data, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("timers: start %s: %w", t.ID, err)
	}
	entry := dueID(t.Due, t.ID)
	if _, err := s.store.Put(ctx, KindDue, entry, []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
		return false, fmt.Errorf("timers: start %s: %w", t.ID, err)
	}
	if _, err := s.store.Put(ctx, KindTimer, t.ID, data, 0); errors.Is(err, store.ErrConflict) {
		// Started before: its entry is the one the stored timer names.
		if cur, gerr := s.Get(ctx, t.ID); gerr == nil && !cur.Due.Equal(t.Due) {
			_ = s.store.Delete(ctx, KindDue, entry, 0)
		}
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("timers: start %s: %w", t.ID, err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true, nil
}

// Stop removes the timer id, and reports whether there was one: a timer
// stopped before it fires does not fire (one being fired at that moment
// may still).
func (s *Service) Stop(ctx context.Context, id string) (bool, error) {
	t, err := s.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.store.Delete(ctx, KindTimer, id, 0); err != nil {
		return false, fmt.Errorf("timers: stop %s: %w", id, err)
	}
	if err := s.store.Delete(ctx, KindDue, dueID(t.Due, id), 0); err != nil {
		return true, fmt.Errorf("timers: stop %s: %w", id, err)
	}
	return true, nil
}

// Get returns the timer id, or an error matching [store.ErrNotFound].
func (s *Service) Get(ctx context.Context, id string) (Timer, error) {
	rec, err := s.store.Get(ctx, KindTimer, id)
	if err != nil {
		return Timer{}, err
	}
	return decode(rec)
}

func decode(rec store.Record) (Timer, error) {
	var t Timer
	if err := json.Unmarshal(rec.Data, &t); err != nil {
		return Timer{}, fmt.Errorf("timers: timer %s: %w", rec.ID, err)
	}
	return t, nil
}

// List returns the timers whose ids start with prefix, by id, at most
// limit (0: all), after the id after.
func (s *Service) List(ctx context.Context, prefix, after string, limit int) ([]Timer, error) {
	recs, err := s.store.List(ctx, KindTimer, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Timer, 0, len(recs))
	for _, rec := range recs {
		t, err := decode(rec)
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}

// subscribed is implemented by a broker that keeps nothing for a channel
// nobody subscribes to (the in-process one; NATS, whose stream keeps a
// message only for the consumers that match it): a timer due on a channel
// with no subscriber yet (its process is still starting), or none on this
// process's broker (a process that shares the store but not the broker:
// another stream or prefix), waits for one, and for a process whose
// broker has one.
type subscribed interface{ Subscribed(channel string) bool }

// subscribedOf returns b, or the broker it wraps (looked through an
// Unwrap() Broker method, as [calf.IsLocal] does), if it is subscribed.
func subscribedOf(b calf.Broker) (subscribed, bool) {
	for b != nil {
		if sb, ok := b.(subscribed); ok {
			return sb, true
		}
		u, ok := b.(interface{ Unwrap() calf.Broker })
		if !ok {
			return nil, false
		}
		b = u.Unwrap()
	}
	return nil, false
}

// Fire fires the timers due now, the earliest first, and returns how many
// it fired and when the next one is due (zero when none is kept). Timers
// that another process is firing are left to it until its lease ends; on
// a broker that keeps nothing for a channel nobody subscribes to (the
// in-process one, NATS), a timer whose channel has no subscriber yet is
// left for a later pass (the next time returned is then within Poll), or
// for another process whose broker has one.
//
// The due timers are taken a page of the index at a time (Options.Page):
// the leases of a page are written together, its timers read together,
// and removed together once their events are out, so that a store that
// batches concurrent operations (PostgreSQL, SQLite) serves a page in a
// few round trips rather than a few per timer. Each timer still goes
// through the steps of one: its lease, its read, its event (in the order
// of the index), its removal.
func (s *Service) Fire(ctx context.Context) (int, time.Time, error) {
	fired := 0
	held := time.Time{}
	for after := ""; ; {
		now := s.now()
		entries, err := s.store.List(ctx, KindDue, "", after, s.page)
		if err != nil {
			return fired, time.Time{}, fmt.Errorf("timers: read the due timers: %w", err)
		}
		var page []dueEntry
		next := time.Time{}
		for _, e := range entries {
			after = e.ID
			due, id, ok := parseDue(e.ID)
			if !ok {
				_ = s.store.Delete(ctx, KindDue, e.ID, e.Version)
				continue
			}
			if due.After(now) {
				next = due
				break
			}
			page = append(page, dueEntry{rec: e, due: due, id: id})
		}
		n, waits, err := s.firePage(ctx, page, now)
		fired += n
		if waits {
			held = now.Add(s.poll)
		}
		if err != nil {
			return fired, time.Time{}, err
		}
		if !next.IsZero() {
			if !held.IsZero() {
				return fired, held, nil
			}
			return fired, next, nil
		}
		if len(entries) < s.page {
			return fired, held, nil
		}
	}
}

// dueEntry is an index entry due now, and what firing it has learned.
type dueEntry struct {
	rec   store.Record // the entry as listed
	due   time.Time
	id    string
	taken int64        // the entry's version once leased; 0: not taken
	timer store.Record // the timer, read once the entry is taken
	err   error        // the first error met firing it
}

// concurrently runs fn(i) for each i < n at once (a page at most), and
// waits for them: a store that batches operations sends those that arrive
// together in one round trip.
func concurrently(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// firePage fires the timers of page, entries due now in the order of the
// index, unless other processes hold them, and reports how many it fired
// and whether some wait for a subscriber.
func (s *Service) firePage(ctx context.Context, page []dueEntry, now time.Time) (int, bool, error) {
	// Entries another process holds are left to it.
	page = slices.DeleteFunc(page, func(d dueEntry) bool {
		var l lease
		_ = json.Unmarshal(d.rec.Data, &l)
		return l.Owner != "" && l.Owner != s.owner && l.Until.After(now)
	})
	waits := false
	if sb, ok := subscribedOf(s.client.Broker()); ok && len(page) > 0 {
		channels := make([]string, len(page))
		concurrently(len(page), func(i int) {
			if t, err := s.Get(ctx, page[i].id); err == nil {
				channels[i] = t.Channel
			}
		})
		kept := page[:0]
		for i, d := range page {
			if channels[i] != "" && !sb.Subscribed(channels[i]) {
				waits = true
				continue
			}
			kept = append(kept, d)
		}
		page = kept
	}
	if len(page) == 0 {
		return 0, waits, nil
	}
	until := now.Add(s.lease)
	data, err := json.Marshal(lease{Owner: s.owner, Until: until})
	if err != nil {
		return 0, waits, err
	}
	// The leases, then the timers of the entries taken.
	concurrently(len(page), func(i int) {
		d := &page[i]
		v, err := s.store.Put(ctx, KindDue, d.rec.ID, data, d.rec.Version)
		switch {
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			// Another process took it, or fired it.
		case err != nil:
			d.err = fmt.Errorf("timers: take %s: %w", d.id, err)
		default:
			d.taken = v
			d.timer, err = s.store.Get(ctx, KindTimer, d.id)
			if err != nil {
				d.err = err
			}
		}
	})
	// The events, in the order of the index, while the leases hold.
	fired := make([]bool, len(page))
	var first error
	for i := range page {
		d := &page[i]
		if first != nil {
			break
		}
		if d.taken == 0 {
			first = d.err // nil when another process took it
			continue
		}
		if errors.Is(d.err, store.ErrNotFound) {
			// Stopped, or half started.
			first = s.store.Delete(ctx, KindDue, d.rec.ID, d.taken)
			continue
		}
		if d.err != nil {
			first = fmt.Errorf("timers: read %s: %w", d.id, d.err)
			continue
		}
		t, err := decode(d.timer)
		if err != nil || !t.Due.Equal(d.due) {
			// Not this entry's timer (a start of the same id that
			// failed halfway) or one that cannot be read: the entry
			// goes.
			if err != nil {
				s.log.Error("timers: a stored timer does not decode; it is removed", "timer", d.id, "err", err)
				_ = s.store.Delete(ctx, KindTimer, d.id, d.timer.Version)
			}
			first = s.store.Delete(ctx, KindDue, d.rec.ID, d.taken)
			continue
		}
		if !s.now().Before(until) {
			// The lease ran out while the page was fired: the rest
			// are taken again by the next pass, here or elsewhere.
			break
		}
		if err := s.emit(ctx, t); err != nil {
			first = fmt.Errorf("timers: fire %s: %w", d.id, err)
			continue
		}
		fired[i] = true
	}
	// The timers fired, then their entries: an entry goes only once its
	// timer has, so that a timer is never kept without one.
	n := 0
	concurrently(len(page), func(i int) {
		if !fired[i] {
			return
		}
		d := &page[i]
		if err := s.store.Delete(ctx, KindTimer, d.id, d.timer.Version); err != nil {
			d.err = fmt.Errorf("timers: fired %s, not removed: %w", d.id, err)
		}
	})
	concurrently(len(page), func(i int) {
		d := &page[i]
		if !fired[i] || d.err != nil {
			return
		}
		if err := s.store.Delete(ctx, KindDue, d.rec.ID, d.taken); err != nil {
			d.err = fmt.Errorf("timers: fired %s, its entry not removed: %w", d.id, err)
		}
	})
	for i := range page {
		if fired[i] {
			n++
			if first == nil && page[i].err != nil {
				first = page[i].err
			}
		}
	}
	return n, waits, first
}

// emit sends t's event.
func (s *Service) emit(ctx context.Context, t Timer) error {
	eventID := t.EventID
	if eventID == "" {
		eventID = t.ID
	}
	opts := []calf.EmitOption{calf.WithID(eventID), calf.WithMetadata(t.Metadata)}
	if t.Key != "" {
		opts = append(opts, calf.WithKey(t.Key))
	}
	var payload any = t.Data
	if len(t.Data) == 0 {
		payload = json.RawMessage("null")
	}
	_, err := s.client.Emit(ctx, t.Channel, payload, opts...)
	return err
}

// Run fires the timers as they fall due until ctx ends: it reads the
// index when the earliest timer is due, when a timer is started in this
// process, and at least every Poll; after an error (the store or the
// broker unreachable), again after a pause that doubles up to 5 s. Run
// returns nil when ctx ends. A second Run of the same service while one
// runs returns at once.
func (s *Service) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.running {
		s.runMu.Unlock()
		return nil
	}
	s.running = true
	s.runMu.Unlock()
	defer func() {
		s.runMu.Lock()
		s.running = false
		s.runMu.Unlock()
	}()
	backoff := 50 * time.Millisecond
	for {
		_, next, err := s.Fire(ctx)
		wait := s.poll
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Warn("timers: firing paused", "err", err, "retry_in", backoff)
			wait = backoff
			backoff = min(2*backoff, 5*time.Second)
		default:
			backoff = 50 * time.Millisecond
			if !next.IsZero() {
				wait = min(wait, max(next.Sub(s.now()), 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.wake:
			t.Stop()
		case <-t.C:
		}
	}
}
