package reactive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// Delta is one change of a store's state: what an action (or an undo or
// redo) changed. It is what subscribers get, and what travels on the
// broker (channel [DeltaChannel]).
type Delta struct {
	Store  string `json:"store"`
	Action string `json:"action"`
	// Payload is the action's payload, as JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Paths are the paths the action changed ("agents.translator.should_act").
	Paths []string `json:"paths"`
	// Version is the state's version after the change: 1 for the first
	// change, one more for each; with a persisted store, shared by every
	// process that dispatches to it.
	Version int64 `json:"version"`
	// Before and After are the JSON values at each of Paths before and
	// after the change (null for none).
	Before map[string]json.RawMessage `json:"before,omitempty"`
	After  map[string]json.RawMessage `json:"after,omitempty"`
}

// Changed reports whether the delta concerns pattern (see [MatchPath]).
func (d *Delta) Changed(pattern string) bool { return matchAny(pattern, d.Paths) }

// Options configure a [Store]. A nil *Options means the defaults.
type Options struct {
	// State, when set, keeps the state in a Calf state store (kind
	// [KindState], id the store's name), written with compare-and-swap:
	// every process that dispatches to the same store sees one sequence
	// of versions, and no update is lost. Default: the state lives in
	// this process only.
	State store.Store
	// Client, when set, publishes each delta on the broker
	// ([DeltaChannel]), so that subscribers in other processes
	// ([Store.Listen]) and state-triggered agents see it.
	Client *calf.Client
	// History is how many deltas Undo can take back. Default 100;
	// negative: none.
	History int
	// Logger receives the store's diagnostics. Default: the client's, or
	// none.
	Logger *slog.Logger
}

// KindState is the Calf store kind of persisted reactive stores' states.
const KindState = "reactive_state"

// DeltaChannel returns the channel of a store's deltas.
func DeltaChannel(name string) string { return "calf.store." + name + ".delta" }

var storeNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Store is a typed state that changes only through its actions. Each
// change is a [Delta] that subscribers see, here and, through the broker,
// in other processes. Reading the state ([Store.Get]) returns a snapshot
// that later changes leave as it is: actions return new states rather
// than change the old (see [ActionFunc]), so a snapshot costs nothing to
// take. Store is safe for concurrent use.
type Store[S any] struct {
	name    string
	actions *Actions[S]
	opts    Options
	log     *slog.Logger

	mu      sync.Mutex
	state   S
	version int64
	rec     store.Record // the persisted record this state was read from
	subs    []*subscription
	nextSub int
	done    []*change // for Undo, oldest first
	undone  []*change // for Redo
	// Notifications go out in the order of tickets, one per change this
	// process learns of; seen holds the versions already ticketed.
	ticket, delivered int64
	cond              *sync.Cond
	seen              map[int64]bool
	// dispatched are the ids of the latest dispatches made once, for a
	// state kept in this process (see dispatchOnce).
	dispatched []string
}

// change is a change this process made, kept for Undo and Redo: its
// delta, and which of its paths had no value before and after it (the
// delta says null both for a null value and for none).
type change struct {
	d             *Delta
	before, after map[string]*absence
}

type subscription struct {
	id      int
	pattern string
	fn      func(*Delta)
}

// NewStore returns a store named name (letters, digits, '_', '-') with
// state initial and actions. A persisted store ([Options.State]) starts
// from the stored state and its version when there is one, which NewStore
// reads (an error reading it, or a stored state that does not decode, is
// NewStore's error); when there is none, initial is its state before the
// first change, at version 0.
func NewStore[S any](name string, initial S, actions *Actions[S], opts *Options) (*Store[S], error) {
	if !storeNameRE.MatchString(name) {
		return nil, fmt.Errorf("reactive: store name %q must match %s", name, storeNameRE)
	}
	if actions == nil {
		actions = &Actions[S]{}
	}
	s := &Store[S]{name: name, actions: actions, state: initial, seen: map[int64]bool{}}
	s.cond = sync.NewCond(&s.mu)
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.History == 0 {
		s.opts.History = 100
	}
	s.log = s.opts.Logger
	if s.log == nil && s.opts.Client != nil {
		s.log = s.opts.Client.Logger()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if _, err := json.Marshal(initial); err != nil {
		return nil, fmt.Errorf("reactive: store %s: the state does not encode to JSON: %w", name, err)
	}
	if err := s.Refresh(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns the store's name.
func (s *Store[S]) Name() string { return s.name }

// Actions returns the store's actions.
func (s *Store[S]) Actions() *Actions[S] { return s.actions }

// Get returns the state as this process last saw it. It is a snapshot:
// later changes do not change it, and it must not be changed (see
// [ActionFunc]). For a persisted store, [Store.Refresh] reads the latest.
func (s *Store[S]) Get() S {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Version returns the version of the state Get returns.
func (s *Store[S]) Version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Subscribe calls fn with each delta that concerns pattern (see
// [MatchPath]; "" for all), once, in the order this process learns of the
// changes, after the change: for
// changes dispatched in this process, before Dispatch returns; for
// changes of other processes, once [Store.Listen] hears of them. fn must
// not dispatch to the same store synchronously. It returns a function
// that ends the subscription.
func (s *Store[S]) Subscribe(pattern string, fn func(d *Delta)) (unsubscribe func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSub++
	sub := &subscription{id: s.nextSub, pattern: pattern, fn: fn}
	s.subs = append(s.subs, sub)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.subs = slices.DeleteFunc(s.subs, func(x *subscription) bool { return x == sub })
	}
}

// ErrNoHistory is returned by Undo and Redo when there is nothing to take
// back or to do again.
var ErrNoHistory = errors.New("reactive: nothing to undo or redo")

// Dispatch runs the action name with payload (encoded as JSON) and
// returns its delta: nil when the action changed nothing. An unknown
// action is an error matching [ErrUnknownAction]; an action's error is
// returned as is and changes nothing.
func (s *Store[S]) Dispatch(ctx context.Context, name string, payload any) (*Delta, error) {
	return s.dispatchIf(ctx, "", name, payload, nil)
}

// dispatchOnce is Dispatch, but the action runs at most once for id: a
// dispatch whose id the store has seen among its last [keptDispatches]
// changes nothing and returns a nil delta. The ids are kept with the
// state, in the same compare-and-swap as the change.
func (s *Store[S]) dispatchOnce(ctx context.Context, id, name string, payload any) (*Delta, error) {
	return s.dispatchIf(ctx, id, name, payload, nil)
}

// keptDispatches is how many ids of dispatches made once a store keeps.
const keptDispatches = 1024

// dispatchIf is Dispatch, but the action runs only if cond, when set,
// accepts the state it is about to change (the latest, read in the same
// compare-and-swap as the write); cond's error is returned otherwise, and
// nothing changes.
func (s *Store[S]) dispatchIf(ctx context.Context, id, name string, payload any, cond func(S) error) (*Delta, error) {
	a, ok := s.actions.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q in store %s", ErrUnknownAction, name, s.name)
	}
	var raw json.RawMessage
	if payload != nil {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("%w for action %s: %v", ErrPayload, name, err)
		}
	}
	run := a.run
	if cond != nil {
		run = func(st S, raw json.RawMessage) (S, []string, error) {
			if err := cond(st); err != nil {
				return st, nil, err
			}
			return a.run(st, raw)
		}
	}
	c, ticket, err := s.apply(ctx, id, name, raw, run)
	if err != nil || c == nil {
		return nil, err
	}
	s.mu.Lock()
	s.record(c)
	s.mu.Unlock()
	return c.d, s.after(ctx, c.d, ticket)
}

// record keeps c for Undo, with s.mu held.
func (s *Store[S]) record(c *change) {
	if s.opts.History < 0 {
		return
	}
	s.done = append(s.done, c)
	if len(s.done) > s.opts.History {
		s.done = s.done[len(s.done)-s.opts.History:]
	}
	s.undone = nil
}

// Undo takes back the last change this process made that Undo has not:
// the paths it changed get their values from before it, as a new change
// (action "undo") that subscribers see like any. A path that had no value
// before has none again: a map entry the change added is deleted, a slice
// it grew is cut back to its length (and a slice it shortened grows back).
func (s *Store[S]) Undo(ctx context.Context) (*Delta, error) {
	return s.replay(ctx, true)
}

// Redo does again the last change Undo took back, unless a change was
// dispatched since (action "redo").
func (s *Store[S]) Redo(ctx context.Context) (*Delta, error) {
	return s.replay(ctx, false)
}

func (s *Store[S]) replay(ctx context.Context, undo bool) (*Delta, error) {
	s.mu.Lock()
	from := &s.undone
	if undo {
		from = &s.done
	}
	if len(*from) == 0 {
		s.mu.Unlock()
		return nil, ErrNoHistory
	}
	orig := (*from)[len(*from)-1]
	s.mu.Unlock()
	values, none, name := orig.d.Before, orig.before, "undo"
	if !undo {
		values, none, name = orig.d.After, orig.after, "redo"
	}
	// In the order of indexes: the elements a slice gets back are added
	// at its end one after the other.
	paths := slices.SortedFunc(slices.Values(orig.d.Paths), comparePaths)
	c, ticket, err := s.apply(ctx, "", name, nil, func(st S, _ json.RawMessage) (S, []string, error) {
		var err error
		for _, p := range paths {
			if a := none[p]; a != nil {
				st, err = removeJSONAt(st, a)
			} else {
				v, ok := values[p]
				if !ok {
					v = json.RawMessage("null")
				}
				st, err = setJSONAt(st, p, v)
			}
			if err != nil {
				return st, nil, err
			}
		}
		return st, slices.Clone(paths), nil
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if n := len(*from); n > 0 && (*from)[n-1] == orig {
		*from = (*from)[:n-1]
	}
	if c != nil {
		if undo {
			s.undone = append(s.undone, orig)
		} else {
			s.done = append(s.done, orig)
		}
	}
	s.mu.Unlock()
	if c == nil {
		return nil, nil
	}
	return c.d, s.after(ctx, c.d, ticket)
}

// apply runs run on the state (the latest persisted one, for a persisted
// store) and records the result: the change, nil when nothing changed.
// apply runs the action name on the state; with an id, only if no
// dispatch of that id ran (see dispatchOnce).
func (s *Store[S]) apply(ctx context.Context, id, name string, raw json.RawMessage, run func(S, json.RawMessage) (S, []string, error)) (*change, int64, error) {
	var c *change
	var d *Delta
	step := func(cur S, version int64) (S, error) {
		next, paths, err := run(cur, raw)
		if err != nil {
			return cur, err
		}
		c, d = nil, nil
		if len(paths) == 0 {
			return cur, nil
		}
		paths = slices.Compact(slices.Sorted(slices.Values(paths)))
		d = &Delta{Store: s.name, Action: name, Payload: raw, Paths: paths, Version: version + 1,
			Before: make(map[string]json.RawMessage, len(paths)), After: make(map[string]json.RawMessage, len(paths))}
		c = &change{d: d}
		for _, p := range paths {
			var before, after *absence
			d.Before[p], before = lookup(&cur, p)
			d.After[p], after = lookup(&next, p)
			if before != nil {
				if c.before == nil {
					c.before = map[string]*absence{}
				}
				c.before[p] = before
			}
			if after != nil {
				if c.after == nil {
					c.after = map[string]*absence{}
				}
				c.after[p] = after
			}
		}
		return next, nil
	}
	if s.opts.State == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if id != "" && slices.Contains(s.dispatched, id) {
			return nil, 0, nil
		}
		next, err := step(s.state, s.version)
		if err != nil || d == nil {
			return nil, 0, err
		}
		s.state, s.version = next, d.Version
		if id != "" {
			s.dispatched = keepDispatched(s.dispatched, id)
		}
		return c, s.take(d.Version), nil
	}
	s.mu.Lock()
	known := s.rec
	s.mu.Unlock()
	var next S
	fn := func(data []byte, exists bool) ([]byte, error) {
		cur, version, err := s.decode(data, exists)
		if err != nil {
			return nil, err
		}
		var ids []string
		if exists {
			var st stored
			_ = json.Unmarshal(data, &st) // decoded above
			ids = st.Dispatched
		}
		if id != "" && slices.Contains(ids, id) {
			c, d = nil, nil
			return nil, nil
		}
		if next, err = step(cur, version); err != nil || d == nil {
			return nil, err
		}
		state, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("reactive: store %s: encode the state: %w", s.name, err)
		}
		if id != "" {
			ids = keepDispatched(ids, id)
		}
		return json.Marshal(stored{Version: d.Version, State: state, Dispatched: ids})
	}
	var rec store.Record
	var err error
	// A store that many processes hammer can take more than one Update's
	// attempts: go on, from a fresh read, a while longer.
	for round := 0; ; round++ {
		if known.Version > 0 {
			rec, err = store.UpdateFrom(ctx, s.opts.State, known, fn)
		} else {
			rec, err = store.Update(ctx, s.opts.State, KindState, s.name, fn)
		}
		if !errors.Is(err, store.ErrConflict) || round >= maxConflictRounds || ctx.Err() != nil {
			break
		}
		known = store.Record{}
		t := time.NewTimer(time.Duration(rand.N(25_000)+1) * time.Microsecond)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reactive: store %s: action %s: %w", s.name, name, err)
	}
	if d == nil {
		// Nothing changed; keep what was read, if newer.
		if rec.Version > 0 {
			if cur, version, err := s.decode(rec.Data, true); err == nil {
				s.mu.Lock()
				if version > s.version {
					s.state, s.version, s.rec = cur, version, rec
				}
				s.mu.Unlock()
			}
		}
		return nil, 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Version > s.version {
		s.state, s.version, s.rec = next, d.Version, rec
	}
	return c, s.take(d.Version), nil
}

// take returns the ticket of the change to version, with s.mu held.
func (s *Store[S]) take(version int64) int64 {
	s.seen[version] = true
	if len(s.seen) > 4096 {
		for v := range s.seen {
			if v < version-2048 {
				delete(s.seen, v)
			}
		}
	}
	s.ticket++
	return s.ticket
}

// maxConflictRounds bounds the rounds of store.Update a dispatch tries
// before it reports a conflict.
const maxConflictRounds = 20

// stored is a persisted state.
type stored struct {
	Version int64           `json:"version"`
	State   json.RawMessage `json:"state"`
	// Dispatched are the ids of the latest dispatches made once (see
	// dispatchOnce), oldest first.
	Dispatched []string `json:"dispatched,omitempty"`
}

// keepDispatched returns ids with id added, the oldest dropped past
// keptDispatches.
func keepDispatched(ids []string, id string) []string {
	ids = append(ids, id)
	if len(ids) > keptDispatches {
		ids = slices.Clone(ids[len(ids)-keptDispatches:])
	}
	return ids
}

// decode reads a persisted state, or the initial state when there is
// none.
func (s *Store[S]) decode(data []byte, exists bool) (S, int64, error) {
	if !exists {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.rec.Version == 0 {
			return s.state, s.version, nil
		}
	}
	var st stored
	var out S
	if err := json.Unmarshal(data, &st); err != nil {
		return out, 0, fmt.Errorf("reactive: store %s: corrupt state: %w", s.name, err)
	}
	if err := json.Unmarshal(st.State, &out); err != nil {
		return out, 0, fmt.Errorf("reactive: store %s: corrupt state: %w", s.name, err)
	}
	return out, st.Version, nil
}

// Refresh reads the persisted state, if newer than the one Get returns.
func (s *Store[S]) Refresh(ctx context.Context) error {
	if s.opts.State == nil {
		return nil
	}
	rec, err := s.opts.State.Get(ctx, KindState, s.name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reactive: store %s: %w", s.name, err)
	}
	cur, version, err := s.decode(rec.Data, true)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if version > s.version {
		s.state, s.version, s.rec = cur, version, rec
	}
	return nil
}

// after publishes d and tells the subscribers.
func (s *Store[S]) after(ctx context.Context, d *Delta, ticket int64) error {
	var err error
	if c := s.opts.Client; c != nil {
		_, err = c.Emit(ctx, DeltaChannel(s.name), d, calf.WithID(s.name+".delta."+strconv.FormatInt(d.Version, 10)), calf.WithKey(s.name))
		if err != nil {
			err = fmt.Errorf("reactive: store %s: publish the delta of version %d (the change is made): %w", s.name, d.Version, err)
		}
	}
	s.notify(d, ticket)
	return err
}

// notify calls the subscribers that d concerns, after those of the
// changes ticketed before it.
func (s *Store[S]) notify(d *Delta, ticket int64) {
	s.mu.Lock()
	for s.delivered != ticket-1 {
		s.cond.Wait()
	}
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.delivered = ticket
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for _, sub := range subs {
		if d.Changed(sub.pattern) {
			sub.fn(d)
		}
	}
}

// Listen tells this process's subscribers of the changes other processes
// dispatch to the store, from the broker ([Options.Client]), until ctx
// ends: each delta is heard once, and a persisted store's state is read
// again first, so that Get sees at least what the delta says (the state
// may have moved on since). It returns once it listens.
func (s *Store[S]) Listen(ctx context.Context) error {
	c := s.opts.Client
	if c == nil || s.opts.State == nil {
		return errors.New("reactive: Listen needs Options.Client and Options.State: the processes share the state through the state store")
	}
	if err := calf.CreateChannels(ctx, c.Broker(), DeltaChannel(s.name)); err != nil {
		return err
	}
	// A group of its own: every listening process hears every delta.
	group := DeltaChannel(s.name) + ".listen." + calf.NewID()
	return c.Handle(ctx, DeltaChannel(s.name), func(ctx context.Context, msg *calf.Message) error {
		var d Delta
		if err := msg.Decode(&d); err != nil {
			return calf.Permanent(err)
		}
		s.mu.Lock()
		seen := s.seen[d.Version]
		s.mu.Unlock()
		if seen {
			return nil // made here, or heard already
		}
		if err := s.Refresh(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		if s.seen[d.Version] {
			s.mu.Unlock()
			return nil
		}
		ticket := s.take(d.Version)
		s.mu.Unlock()
		s.notify(&d, ticket)
		return nil
	}, &calf.SubscribeOptions{Group: group})
}
