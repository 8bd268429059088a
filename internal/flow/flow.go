package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/throttled/throttled/v2"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// Kinds of the records of flow control. Every id starts with the target
// ("agent/{name}", "team/{name}", "workflow/{name}") but those of KindRun.
const (
	// KindKey holds the runs of one key that hold a slot, and the state
	// of the key's rate limit: "{target}/{key}".
	KindKey = "flow_key"
	// KindWait holds one run's input while it waits for a slot:
	// "{target}/{key}/{rank}/{seq}/{run}", so that a store's List gives a
	// key's waiting runs in the order they start.
	KindWait = "flow_wait"
	// KindActive indexes the keys that have runs holding a slot or
	// waiting for one: "{target}/{key}".
	KindActive = "flow_active"
	// KindDebounce holds the last input of a key's burst until its window
	// passes: "{target}/{key}".
	KindDebounce = "flow_debounce"
	// KindRun says that a run waits for a slot, or in a debounce window,
	// under its run id: a wait for the run's end waits for it too.
	KindRun = "flow_run"
	// KindTotal holds the runs of a runner with a bound across its keys
	// (Policy.MaxRunning) that hold a slot of it: "{target}".
	KindTotal = "flow_total"
	// KindOrder orders the waiting runs of such a runner across its keys:
	// "{target}/{rank}/{seq}/{key}/{run}".
	KindOrder = "flow_order"
)

// Defaults of [Env].
const (
	DefaultPoll = 200 * time.Millisecond
	// MaxPriority bounds [Policy.Priority]'s values: 0 to MaxPriority.
	MaxPriority = 9999
	maxKeyLen   = 128
)

// Input is what a run's key and priority are computed from.
type Input struct {
	// Kind and Name name the runner: "agent", "team" or "workflow".
	Kind, Name string
	// RunID and SessionID are the run's.
	RunID, SessionID string
	// Prompt is the run's prompt (agents and teams).
	Prompt string
	// Data is the JSON of the run's input event: for a workflow, its
	// state.
	Data json.RawMessage
}

// Policy is what a runner declares.
type Policy struct {
	// Key computes a run's key; nil or "" puts every run under one key.
	Key func(Input) string
	// Concurrency bounds the runs of one key in progress; 0: no bound.
	Concurrency int
	// Rate and Per bound how many runs of one key start per period; Burst
	// lets that many more start at once after a quiet spell. 0: no bound.
	Rate  int
	Per   time.Duration
	Burst int
	// Debounce, when set, makes a burst of inputs of one key, each within
	// Debounce of the one before, start one run: the last input's.
	Debounce time.Duration
	// Priority ranks the waiting runs: higher first, then in the order
	// they came; within a key, and across keys when MaxRunning is set.
	// Values are clamped to 0..MaxPriority.
	Priority func(Input) int
	// MaxRunning bounds the runs in progress across all keys; 0: no
	// bound. When it is reached, the waiting runs start by priority
	// across keys as slots free up.
	MaxRunning int
}

// Check reports what is wrong with p.
func (p Policy) Check() error {
	switch {
	case p.Concurrency < 0 || p.MaxRunning < 0:
		return errors.New("flow control: Concurrency or MaxRunning is negative")
	case p.Rate < 0 || p.Burst < 0:
		return errors.New("flow control: Rate or Burst is negative")
	case p.Rate > 0 && p.Per <= 0:
		return errors.New("flow control: Rate needs a period (Per)")
	case p.Rate > 0 && p.Per/time.Duration(p.Rate) <= 0:
		return errors.New("flow control: Rate is too high for its period")
	case p.Debounce < 0:
		return errors.New("flow control: Debounce is negative")
	}
	return nil
}

// Env is what a [Gate] works with: the runtime's store and clock, and
// the runner's view of its runs.
type Env struct {
	Store store.Store
	Now   func() time.Time
	Log   *slog.Logger
	// Poll bounds the time between two passes over the waiting runs (and
	// the debounce windows): a slot freed by a run's end is given to the
	// next run at most Poll later. Default: [DefaultPoll].
	Poll time.Duration
	// State reports whether the run has a record (exists) and whether it
	// has ended.
	State func(ctx context.Context, runID string) (exists, ended bool, err error)
	// Cancel ends a run never started (one replaced by a later input of
	// its debounce window) with reason.
	Cancel func(ctx context.Context, runID, reason string) error
}

// Gate holds the runs of one runner to its [Policy]: its Handle stands in
// front of the runner's input handler.
type Gate struct {
	target string
	kind   string
	name   string
	policy Policy
	env    Env
	inner  calf.Handler
	decode func(*calf.Message) (Input, error)
	rate   *throttled.GCRARateLimiterCtx

	serving sync.Once
	wake    chan struct{}
}

// New returns the gate of the runner kind/name, in front of inner, its
// input handler; decode gives a run's [Input] from its input message.
func New(kind, name string, p Policy, env Env, inner calf.Handler, decode func(*calf.Message) (Input, error)) (*Gate, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Poll <= 0 {
		env.Poll = DefaultPoll
	}
	if env.Log == nil {
		env.Log = slog.Default()
	}
	g := &Gate{target: kind + "/" + name, kind: kind, name: name, policy: p, env: env, inner: inner, decode: decode, wake: make(chan struct{}, 1)}
	if p.Rate > 0 {
		// The limiter's state is the key record's field, read and
		// written within the record's compare-and-swap (see tatCell).
		rl, err := throttled.NewGCRARateLimiterCtx(nopStore{}, throttled.RateQuota{MaxRate: throttled.PerDuration(p.Rate, p.Per), MaxBurst: p.Burst})
		if err != nil {
			return nil, fmt.Errorf("%s %s: flow control: %w", kind, name, err)
		}
		rl.SetMaxCASAttemptsLimit(1)
		g.rate = rl
	}
	return g, nil
}

// keyState is the record of one key.
type keyState struct {
	// Running maps the runs holding a slot to when they took it.
	Running map[string]time.Time `json:"running,omitempty"`
	// TAT is the rate limit's theoretical arrival time (GCRA), in
	// nanoseconds since 1970; 0 when unset.
	TAT int64 `json:"tat,omitempty"`
}

// waiting is the record of one waiting run: its input message.
type waiting struct {
	Msg *calf.Message `json:"msg"`
}

// runRecord is the record of KindRun.
type runRecord struct {
	Target string `json:"target"`
	Key    string `json:"key"`
	// Wait is the id of the run's KindWait record; empty while the run
	// is in a debounce window.
	Wait string `json:"wait,omitempty"`
}

// debounce is the record of a key's burst.
type debounce struct {
	Msg *calf.Message `json:"msg"`
	Due time.Time     `json:"due"`
}

// Queued reports whether the run runID waits for a slot or in a
// debounce window.
func Queued(ctx context.Context, s store.Store, runID string) (bool, error) {
	_, _, ok, err := Lookup(ctx, s, runID)
	return ok, err
}

// Lookup returns the target ("{kind}/{name}") and the stored key of the
// run runID while it waits for a slot or in a debounce window, and false
// when it does not.
func Lookup(ctx context.Context, s store.Store, runID string) (target, key string, ok bool, err error) {
	rec, err := s.Get(ctx, KindRun, runID)
	if errors.Is(err, store.ErrNotFound) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	var r runRecord
	if err := json.Unmarshal(rec.Data, &r); err != nil {
		return "", "", false, fmt.Errorf("flow: the record of run %s: %w", runID, err)
	}
	return r.Target, r.Key, true, nil
}

// keyOf returns the stored form of the key of in: path-escaped, and
// hashed when long.
func (g *Gate) keyOf(in Input) string {
	k := ""
	if g.policy.Key != nil {
		k = g.policy.Key(in)
	}
	if k == "" {
		return "-"
	}
	k = url.PathEscape(k)
	if len(k) > maxKeyLen {
		sum := sha256.Sum256([]byte(k))
		k = "sha256-" + hex.EncodeToString(sum[:])
	}
	return k
}

func (g *Gate) rank(in Input) string {
	p := 0
	if g.policy.Priority != nil {
		p = min(max(g.policy.Priority(in), 0), MaxPriority)
	}
	return fmt.Sprintf("%04d", MaxPriority-p)
}

// Handle takes a run's input message: a run already recorded goes on to
// the input handler (a message delivered again, or a run submitted
// again); a new one waits for a slot, or in its key's debounce window,
// as a record, and starts when its turn comes, in whichever process
// serves the runner.
func (g *Gate) Handle(ctx context.Context, msg *calf.Message) error {
	runID := msg.Metadata.RunID
	if runID == "" {
		runID = msg.Key
	}
	if runID == "" {
		return calf.Permanent(errors.New("flow control: input message without a run id"))
	}
	exists, _, err := g.env.State(ctx, runID)
	if err != nil {
		return err
	}
	if exists {
		return g.inner(ctx, msg)
	}
	in, err := g.decode(msg)
	if err != nil {
		return calf.Permanent(err)
	}
	key := g.keyOf(in)
	if g.policy.Debounce > 0 {
		return g.debounce(ctx, key, msg)
	}
	if err := g.enqueue(ctx, key, g.rank(in), msg); err != nil {
		return err
	}
	if g.policy.MaxRunning > 0 {
		// Across keys, the pass starts runs by priority.
		g.Wake()
		return nil
	}
	return g.pump(ctx, key)
}

// enqueue records msg's run as waiting under key.
func (g *Gate) enqueue(ctx context.Context, key, rank string, msg *calf.Message) error {
	runID := msg.Metadata.RunID
	// The sequence is the input's publication time: a message delivered
	// again is the same record.
	seq := msg.Metadata.Time
	if seq.IsZero() {
		seq = g.env.Now()
	}
	waitID := g.target + "/" + key + "/" + rank + "/" + fmt.Sprintf("%019d", seq.UnixNano()) + "/" + runID
	rr, err := json.Marshal(runRecord{Target: g.target, Key: key, Wait: waitID})
	if err != nil {
		return err
	}
	if err := put(ctx, g.env.Store, KindRun, runID, rr); err != nil {
		return err
	}
	data, err := json.Marshal(waiting{Msg: msg})
	if err != nil {
		return err
	}
	if err := put(ctx, g.env.Store, KindWait, waitID, data); err != nil {
		return err
	}
	if g.policy.MaxRunning > 0 {
		if err := put(ctx, g.env.Store, KindOrder, g.orderID(waitID), nil); err != nil {
			return err
		}
	}
	return put(ctx, g.env.Store, KindActive, g.target+"/"+key, []byte("{}"))
}

// orderID returns the id of the KindOrder entry of the waiting record
// waitID: its rank and sequence first, so that a List orders the waiting
// runs of every key.
func (g *Gate) orderID(waitID string) string {
	// waitID is "{target}/{key}/{rank}/{seq}/{run}"; the key holds no '/'.
	rest := strings.TrimPrefix(waitID, g.target+"/")
	key, rest, _ := strings.Cut(rest, "/")
	rank, rest, _ := strings.Cut(rest, "/")
	seq, run, _ := strings.Cut(rest, "/")
	return g.target + "/" + rank + "/" + seq + "/" + key + "/" + run
}

// waitOf returns the waiting record's id of the KindOrder entry id.
func (g *Gate) waitOf(orderID string) (waitID, key string) {
	rest := strings.TrimPrefix(orderID, g.target+"/")
	rank, rest, _ := strings.Cut(rest, "/")
	seq, rest, _ := strings.Cut(rest, "/")
	key, run, _ := strings.Cut(rest, "/")
	return g.target + "/" + key + "/" + rank + "/" + seq + "/" + run, key
}

// put creates a record, or leaves it as it is when it exists.
func put(ctx context.Context, s store.Store, kind, id string, data []byte) error {
	_, err := s.Put(ctx, kind, id, data, 0)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// debounce keeps msg as the last input of key's burst, and ends the run
// of the input it replaces.
func (g *Gate) debounce(ctx context.Context, key string, msg *calf.Message) error {
	runID := msg.Metadata.RunID
	rr, err := json.Marshal(runRecord{Target: g.target, Key: key})
	if err != nil {
		return err
	}
	if err := put(ctx, g.env.Store, KindRun, runID, rr); err != nil {
		return err
	}
	var replaced *calf.Message
	by := runID
	_, err = store.Update(ctx, g.env.Store, KindDebounce, g.target+"/"+key, func(data []byte, exists bool) ([]byte, error) {
		replaced, by = nil, runID
		d := debounce{Msg: msg, Due: g.env.Now().Add(g.policy.Debounce)}
		if exists {
			var cur debounce
			if err := json.Unmarshal(data, &cur); err != nil {
				return nil, fmt.Errorf("flow control: read the debounce window of %s: %w", key, err)
			}
			switch {
			case cur.Msg.ID == msg.ID:
				return nil, nil // delivered again
			case msg.Metadata.Time.Before(cur.Msg.Metadata.Time):
				// An older input delivered late: the burst's last input
				// stays, and this one is replaced at once.
				replaced, by = msg, cur.Msg.Metadata.RunID
				return nil, nil
			}
			replaced = cur.Msg
		}
		return json.Marshal(d)
	})
	if err != nil {
		return err
	}
	if replaced != nil {
		return g.replace(ctx, replaced, by)
	}
	return nil
}

// replace ends the run of an input replaced by a later one of its
// debounce window: it is recorded cancelled, and its input handled (so
// that its caller hears of the end).
func (g *Gate) replace(ctx context.Context, msg *calf.Message, by string) error {
	runID := msg.Metadata.RunID
	if runID == by {
		return nil
	}
	if err := g.env.Cancel(ctx, runID, "debounced: a later input with the same key (run "+by+") replaced this one"); err != nil {
		return fmt.Errorf("flow control: end the replaced run %s: %w", runID, err)
	}
	if err := g.inner(calf.ContextWithMessage(ctx, msg), msg); err != nil {
		return err
	}
	return g.env.Store.Delete(ctx, KindRun, runID, 0)
}

// Serve starts, once, the loop that gives freed slots to waiting runs
// and ends debounce windows. It stops with ctx.
func (g *Gate) Serve(ctx context.Context) {
	g.serving.Do(func() { go g.loop(ctx) })
}

func (g *Gate) loop(ctx context.Context) {
	for {
		// A little jitter keeps processes that started together from
		// contending for the same records at the same instant.
		d := g.env.Poll + time.Duration(rand.Int64N(int64(g.env.Poll)/4+1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-g.wake:
			t.Stop()
		}
		if err := g.Pass(ctx); err != nil && ctx.Err() == nil {
			g.env.Log.Warn("flow control: pass over the waiting runs", "runner", g.target, "err", err)
		}
	}
}

// Pass ends the debounce windows that are over, frees the slots of runs
// that have ended and starts the waiting runs that fit. The loop of
// [Gate.Serve] calls it every poll.
func (g *Gate) Pass(ctx context.Context) error {
	var errs []error
	if g.policy.Debounce > 0 {
		errs = append(errs, g.endWindows(ctx))
	}
	if g.policy.MaxRunning > 0 {
		errs = append(errs, g.releaseTotal(ctx), g.admitByPriority(ctx))
	}
	after := ""
	for {
		recs, err := g.env.Store.List(ctx, KindActive, g.target+"/", after, 256)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, r := range recs {
			key := strings.TrimPrefix(r.ID, g.target+"/")
			if err := g.pump(ctx, key); err != nil {
				errs = append(errs, err)
			}
			if err := g.retire(ctx, key, r.Version); err != nil {
				errs = append(errs, err)
			}
		}
		if len(recs) < 256 {
			return errors.Join(errs...)
		}
		after = recs[len(recs)-1].ID
	}
}

// endWindows starts the last input of each burst whose window is over.
func (g *Gate) endWindows(ctx context.Context) error {
	recs, err := g.env.Store.List(ctx, KindDebounce, g.target+"/", "", 0)
	if err != nil {
		return err
	}
	var errs []error
	now := g.env.Now()
	for _, r := range recs {
		var d debounce
		if err := json.Unmarshal(r.Data, &d); err != nil {
			errs = append(errs, fmt.Errorf("flow control: read debounce window %s: %w", r.ID, err))
			continue
		}
		if now.Before(d.Due) {
			continue
		}
		key := strings.TrimPrefix(r.ID, g.target+"/")
		in, err := g.decode(d.Msg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Waiting first, then the window gone: a process that dies in
		// between leaves a window whose input waits already, which the
		// next pass enqueues again to no effect.
		if err := g.enqueue(ctx, key, g.rank(in), d.Msg); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := g.env.Store.Delete(ctx, KindDebounce, r.ID, r.Version); err != nil && !errors.Is(err, store.ErrConflict) {
			errs = append(errs, err)
		}
		if g.policy.MaxRunning == 0 {
			if err := g.pump(ctx, key); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// pump frees the slots of key's runs that have ended and starts the
// waiting runs that fit, in order.
func (g *Gate) pump(ctx context.Context, key string) error {
	kid := g.target + "/" + key
	if err := g.release(ctx, kid); err != nil {
		return err
	}
	if g.policy.MaxRunning > 0 {
		return nil // admitByPriority starts them
	}
	for {
		recs, err := g.env.Store.List(ctx, KindWait, kid+"/", "", 16)
		if err != nil || len(recs) == 0 {
			return err
		}
		for _, r := range recs {
			var w waiting
			if err := json.Unmarshal(r.Data, &w); err != nil || w.Msg == nil {
				g.env.Log.Error("flow control: a waiting run's record does not decode; it is left in place", "runner", g.target, "record", r.ID, "err", err)
				return nil
			}
			ok, since, err := g.admit(ctx, kid, w.Msg.Metadata.RunID)
			if err != nil || !ok {
				return err
			}
			if g.starting(since) {
				continue
			}
			if err := g.start(ctx, r, w.Msg); err != nil {
				return err
			}
		}
		if len(recs) < 16 {
			return nil
		}
	}
}

// start hands an admitted run's input to the input handler, then forgets
// that it waited. A process that dies in between leaves the record,
// which the next pass hands on again: the handler takes a run once. The
// KindRun record goes first, so that a process dying before the end
// leaves the KindWait record, which a pass finds (a KindRun record alone
// no pass would).
func (g *Gate) start(ctx context.Context, r store.Record, msg *calf.Message) error {
	m := msg.Clone()
	if m.Metadata.Attempt == 0 {
		m.Metadata.Attempt = 1
	}
	// The handler runs as if the broker had delivered the message now:
	// what it emits has the message as its cause.
	if err := g.inner(calf.ContextWithMessage(ctx, m), m); err != nil {
		return fmt.Errorf("flow control: start run %s: %w", msg.Metadata.RunID, err)
	}
	if err := g.env.Store.Delete(ctx, KindRun, msg.Metadata.RunID, 0); err != nil {
		return err
	}
	if err := g.env.Store.Delete(ctx, KindWait, r.ID, 0); err != nil {
		return err
	}
	if g.policy.MaxRunning > 0 {
		// Left by a process that dies here, the entry is removed by the
		// pass that finds no waiting record for it.
		return g.env.Store.Delete(ctx, KindOrder, g.orderID(r.ID), 0)
	}
	return nil
}

// maxScan bounds the waiting runs one pass looks at across keys.
const maxScan = 512

// admitByPriority starts the waiting runs across keys, by priority then
// age, while the runner's bound (MaxRunning) has room: a run whose key
// is full (or over its rate) is passed over for the next.
func (g *Gate) admitByPriority(ctx context.Context) error {
	full := map[string]bool{}
	after := ""
	for scanned := 0; scanned < maxScan; {
		recs, err := g.env.Store.List(ctx, KindOrder, g.target+"/", after, 64)
		if err != nil || len(recs) == 0 {
			return err
		}
		for _, o := range recs {
			scanned++
			after = o.ID
			waitID, key := g.waitOf(o.ID)
			if full[key] {
				continue
			}
			r, err := g.env.Store.Get(ctx, KindWait, waitID)
			if errors.Is(err, store.ErrNotFound) {
				// Started, its entry left by a process that died.
				if err := g.env.Store.Delete(ctx, KindOrder, o.ID, 0); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			var w waiting
			if err := json.Unmarshal(r.Data, &w); err != nil || w.Msg == nil {
				g.env.Log.Error("flow control: a waiting run's record does not decode; it is left in place", "runner", g.target, "record", r.ID, "err", err)
				continue
			}
			runID := w.Msg.Metadata.RunID
			ok, err := g.takeTotal(ctx, runID, key)
			if err != nil || !ok {
				return err // the runner is full
			}
			ok, since, err := g.admit(ctx, g.target+"/"+key, runID)
			if err != nil {
				return err
			}
			if ok && g.starting(since) {
				continue
			}
			if !ok {
				full[key] = true
				if err := g.giveBackTotal(ctx, runID); err != nil {
					return err
				}
				continue
			}
			if err := g.start(ctx, r, w.Msg); err != nil {
				return err
			}
		}
		if len(recs) < 64 {
			return nil
		}
	}
	return nil
}

// totalState is the record of KindTotal: the runs holding a slot of
// the runner, with their keys.
type totalState struct {
	Running map[string]string `json:"running,omitempty"`
}

// takeTotal gives runID a slot of the runner's bound if it has room:
// true when the run holds one (also from an earlier take).
func (g *Gate) takeTotal(ctx context.Context, runID, key string) (bool, error) {
	ok := false
	_, err := store.Update(ctx, g.env.Store, KindTotal, g.target, func(data []byte, exists bool) ([]byte, error) {
		ok = false
		var ts totalState
		if exists {
			if err := json.Unmarshal(data, &ts); err != nil {
				return nil, fmt.Errorf("flow control: read the runs of %s: %w", g.target, err)
			}
		}
		if _, held := ts.Running[runID]; held {
			ok = true
			return nil, nil
		}
		if len(ts.Running) >= g.policy.MaxRunning {
			return nil, nil
		}
		if ts.Running == nil {
			ts.Running = map[string]string{}
		}
		ts.Running[runID] = key
		ok = true
		return json.Marshal(ts)
	})
	return ok, err
}

// giveBackTotal frees the runner's slots of runs.
func (g *Gate) giveBackTotal(ctx context.Context, runs ...string) error {
	_, err := store.Update(ctx, g.env.Store, KindTotal, g.target, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, nil
		}
		var ts totalState
		if err := json.Unmarshal(data, &ts); err != nil {
			return nil, err
		}
		n := len(ts.Running)
		for _, r := range runs {
			delete(ts.Running, r)
		}
		if len(ts.Running) == n {
			return nil, nil
		}
		return json.Marshal(ts)
	})
	return err
}

// releaseTotal frees the runner's slots of the runs that have ended, and
// of those that hold one without waiting or running (a process died
// between taking it and starting the run, whose record then went).
func (g *Gate) releaseTotal(ctx context.Context) error {
	rec, err := g.env.Store.Get(ctx, KindTotal, g.target)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var ts totalState
	if err := json.Unmarshal(rec.Data, &ts); err != nil {
		return fmt.Errorf("flow control: read the runs of %s: %w", g.target, err)
	}
	ended, err := g.ended(ctx, maps.Keys(ts.Running))
	if err != nil || len(ended) == 0 {
		return err
	}
	return g.giveBackTotal(ctx, ended...)
}

// ended returns those of runs, which hold slots, whose slots are to be
// freed: the runs that have ended, and those admitted that neither wait
// nor have started (a process died between admitting one and starting
// it, and its waiting records went). A start writes the run's record
// before it removes the waiting ones: a run started since the first look
// has a record at the second.
func (g *Gate) ended(ctx context.Context, runs iter.Seq[string]) ([]string, error) {
	var ended []string
	for run := range runs {
		exists, done, err := g.env.State(ctx, run)
		if err != nil {
			return nil, err
		}
		if done {
			ended = append(ended, run)
			continue
		}
		if !exists {
			if q, err := Queued(ctx, g.env.Store, run); err == nil && !q {
				if exists, done, err := g.env.State(ctx, run); err == nil && (!exists || done) {
					ended = append(ended, run)
				}
			}
		}
	}
	return ended, nil
}

// admit gives runID a slot of key if one is free and the rate allows:
// true when the run holds one (also from an earlier admit).
//
// A run admitted earlier (since is when) is being started by the
// process that admitted it: the caller leaves it to that process unless
// [startLease] has passed (the process died between admitting and
// starting it), so that two processes do not start one run at once.
func (g *Gate) admit(ctx context.Context, kid, runID string) (ok bool, since time.Time, err error) {
	_, err = store.Update(ctx, g.env.Store, KindKey, kid, func(data []byte, exists bool) ([]byte, error) {
		ok, since = false, time.Time{}
		var ks keyState
		if exists {
			if err := json.Unmarshal(data, &ks); err != nil {
				return nil, fmt.Errorf("flow control: read key %s: %w", kid, err)
			}
		}
		if at, held := ks.Running[runID]; held {
			ok, since = true, at
			return nil, nil
		}
		if c := g.policy.Concurrency; c > 0 && len(ks.Running) >= c {
			return nil, nil
		}
		if g.rate != nil {
			cell := &tatCell{tat: ks.TAT, now: g.env.Now()}
			limited, _, err := g.rate.RateLimitCtx(withCell(ctx, cell), kid, 1)
			if err != nil {
				return nil, fmt.Errorf("flow control: rate of key %s: %w", kid, err)
			}
			if limited {
				return nil, nil
			}
			ks.TAT = cell.tat
		}
		if ks.Running == nil {
			ks.Running = map[string]time.Time{}
		}
		ks.Running[runID] = g.env.Now()
		ok = true
		return json.Marshal(ks)
	})
	return ok, since, err
}

// startLease is how long a run admitted by one process is left to it to
// start, before another starts it in its place.
const startLease = 5 * time.Second

// starting reports whether a run admitted since is still the admitting
// process's to start.
func (g *Gate) starting(since time.Time) bool {
	return !since.IsZero() && g.env.Now().Sub(since) < max(startLease, 10*g.env.Poll)
}

// release frees the slots of the runs of key that have ended.
func (g *Gate) release(ctx context.Context, kid string) error {
	rec, err := g.env.Store.Get(ctx, KindKey, kid)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var ks keyState
	if err := json.Unmarshal(rec.Data, &ks); err != nil {
		return fmt.Errorf("flow control: read key %s: %w", kid, err)
	}
	ended, err := g.ended(ctx, maps.Keys(ks.Running))
	if err != nil || len(ended) == 0 {
		return err
	}
	_, err = store.UpdateFrom(ctx, g.env.Store, rec, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, nil
		}
		var ks keyState
		if err := json.Unmarshal(data, &ks); err != nil {
			return nil, err
		}
		for _, run := range ended {
			delete(ks.Running, run)
		}
		return json.Marshal(ks)
	})
	return err
}

// retire removes key from the index of active keys once it has no run
// holding a slot, waiting or in a debounce window; version is the index
// entry's as listed.
func (g *Gate) retire(ctx context.Context, key string, version int64) error {
	kid := g.target + "/" + key
	rec, err := g.env.Store.Get(ctx, KindKey, kid)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		var ks keyState
		if err := json.Unmarshal(rec.Data, &ks); err != nil {
			return err
		}
		if len(ks.Running) > 0 {
			return nil
		}
		if ks.TAT > g.env.Now().UnixNano() {
			return nil // the rate limit still remembers the key
		}
	}
	if recs, err := g.env.Store.List(ctx, KindWait, kid+"/", "", 1); err != nil || len(recs) > 0 {
		return err
	}
	if err := g.env.Store.Delete(ctx, KindActive, kid, version); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	// A run that came to wait meanwhile wrote its waiting record before
	// the index entry: look again, and put the entry back for it.
	if recs, err := g.env.Store.List(ctx, KindWait, kid+"/", "", 1); err != nil || len(recs) == 0 {
		if err == nil && rec.Version > 0 {
			return g.env.Store.Delete(ctx, KindKey, kid, rec.Version)
		}
		return err
	}
	return put(ctx, g.env.Store, KindActive, kid, []byte("{}"))
}

// Stats is what [Gate.Stats] counts.
type Stats struct {
	Running, Waiting int
}

// Stats counts the runs of key (as computed by the policy from in) that
// hold a slot and that wait for one.
func (g *Gate) Stats(ctx context.Context, in Input) (Stats, error) {
	kid := g.target + "/" + g.keyOf(in)
	var s Stats
	rec, err := g.env.Store.Get(ctx, KindKey, kid)
	if err == nil {
		var ks keyState
		if err := json.Unmarshal(rec.Data, &ks); err != nil {
			return s, err
		}
		s.Running = len(ks.Running)
	} else if !errors.Is(err, store.ErrNotFound) {
		return s, err
	}
	recs, err := g.env.Store.List(ctx, KindWait, kid+"/", "", 0)
	s.Waiting = len(recs)
	return s, err
}

// Wake asks the loop for a pass now.
func (g *Gate) Wake() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Target is the runner the gate holds: "{kind}/{name}".
func (g *Gate) Target() string { return g.target }
