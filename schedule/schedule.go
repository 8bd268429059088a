package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// Kind is the store kind of a schedule's record, under its name.
const Kind = "schedule"

// FireChannel is the channel of the schedules' firings: each is a
// [FireEvent], emitted by the schedule's timer (or by Trigger).
const FireChannel = "calf.schedules.fire"

// MaxHistory bounds the firings a schedule's record keeps.
const MaxHistory = 20

// Errors of the schedules' controls.
var (
	// ErrNotFound matches the error for a schedule that does not exist,
	// and store.ErrNotFound.
	ErrNotFound = store.NotFound("schedule: no such schedule")
	// ErrExists is the error of Add for a name that is taken.
	ErrExists = errors.New("schedule: a schedule of that name exists")
)

// Schedule is a schedule as stored: its spec and its state.
type Schedule struct {
	Spec
	// Paused reports that the schedule starts nothing until resumed.
	Paused bool `json:"paused,omitempty"`
	// Next is its next firing, zero while it is paused.
	Next time.Time `json:"next,omitzero"`
	// Created and Updated say when it was added and last written.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Buffered, under [OverlapBufferOne], is the firing waiting for the
	// run in progress to end.
	Buffered time.Time `json:"buffered,omitzero"`
	// History is what its last firings did, the latest last.
	History []Firing `json:"history,omitempty"`
	// Pending is what the firing being carried out decided, written
	// before it starts its runs, until it is recorded in History.
	Pending *Pending `json:"pending,omitempty"`
}

// Pending is what a firing decided: written before its runs start, so
// that the firing carried out again (its process killed midway, its
// event delivered again once later firings are due) starts the same runs
// and records the same, not the runs of a later decision.
type Pending struct {
	// At is the firing's due time.
	At time.Time `json:"at"`
	// History is what it does: the firings due, those that start a run
	// with their runs, and those skipped.
	History []Firing `json:"history"`
	// Next and Buffered are the schedule's next firing and buffered
	// firing after it.
	Next     time.Time `json:"next,omitzero"`
	Buffered time.Time `json:"buffered,omitzero"`
}

// Firing is what one firing of a schedule did.
type Firing struct {
	// At is the time it was due; Fired when it was carried out.
	At    time.Time `json:"at"`
	Fired time.Time `json:"fired"`
	// RunID is the run it started, empty when it started none.
	RunID string `json:"run_id,omitempty"`
	// Skipped says why it started no run: "overlap" (a run of the
	// schedule was in progress), "missed" (late, under CatchUpNone),
	// "buffered" (kept until the run in progress ends).
	Skipped string `json:"skipped,omitempty"`
	// Trigger marks a firing asked for by Trigger.
	Trigger bool `json:"trigger,omitempty"`
}

// FireEvent is the payload of [FireChannel].
type FireEvent struct {
	Schedule string    `json:"schedule"`
	At       time.Time `json:"at"`
	// Trigger marks a firing asked for by Trigger; Recheck, the check of
	// a buffered firing.
	Trigger bool `json:"trigger,omitempty"`
	Recheck bool `json:"recheck,omitempty"`
}

// RunID returns the id of the run a schedule starts for its firing at:
// the schedule and the time, so that a firing carried out twice starts
// one run.
func RunID(name string, at time.Time, trigger bool) string {
	s := "sched-" + name + "-" + at.UTC().Format(runIDTime)
	if trigger {
		s += "-trigger"
	}
	return s
}

// runIDTime is the layout of the time in a [RunID].
const runIDTime = "20060102T150405.000Z"

// NameOf returns the name of the schedule whose firing started the run
// runID (an id made by [RunID]), and false for an id RunID does not make.
func NameOf(runID string) (string, bool) {
	rest, ok := strings.CutPrefix(runID, "sched-")
	if !ok {
		return "", false
	}
	rest = strings.TrimSuffix(rest, "-trigger")
	i := len(rest) - len(runIDTime) - 1
	if i < 1 || rest[i] != '-' {
		return "", false
	}
	if _, err := time.Parse(runIDTime, rest[i+1:]); err != nil {
		return "", false
	}
	name := rest[:i]
	if !nameRE.MatchString(name) {
		return "", false
	}
	return name, true
}

// triggerTime returns the time of the trigger of the schedule name whose
// run is id ([RunID] with trigger set).
func triggerTime(name, id string) (time.Time, error) {
	ts, ok := strings.CutPrefix(id, "sched-"+name+"-")
	if ok {
		ts, ok = strings.CutSuffix(ts, "-trigger")
	}
	at, err := time.Parse(runIDTime, ts)
	if !ok || err != nil {
		return time.Time{}, fmt.Errorf("run %s is not a trigger's of schedule %s", id, name)
	}
	return at, nil
}

// Options configure a [Scheduler].
type Options struct {
	// Now is the clock. Default: the runtime's client's.
	Now func() time.Time
	// Recheck is how often a buffered firing checks whether the run it
	// waits for has ended. Default: 5 s.
	Recheck time.Duration
	// Logger receives the scheduler's diagnostics. Default: the client's.
	Logger *slog.Logger
}

// Scheduler keeps schedules in a runtime's store and carries out their
// firings. Any number of processes may have one on the same store and
// broker: each firing is a durable timer fired by one of them, and starts
// a run whose id derives from the schedule and the time, so it is never
// started twice.
type Scheduler struct {
	rt      *agent.Runtime
	now     func() time.Time
	recheck time.Duration
	log     *slog.Logger
}

// New returns a scheduler on rt.
func New(rt *agent.Runtime, opts *Options) *Scheduler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = rt.Client().Now
	}
	if o.Recheck <= 0 {
		o.Recheck = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = rt.Client().Logger()
	}
	return &Scheduler{rt: rt, now: o.Now, recheck: o.Recheck, log: o.Logger}
}

// Serve has this process carry out the schedules' firings: it subscribes
// to [FireChannel] (in a group that the processes serving schedules
// share) and fires the runtime's timers ([agent.Runtime.ServeTimers]).
// The runs the schedules start are carried out by whichever processes
// serve their agents, teams and workflows.
func (s *Scheduler) Serve(ctx context.Context) error {
	s.rt.ServeTimers()
	s.rt.AddKind(team.Kind, workflow.Kind)
	return s.rt.Client().Handle(ctx, FireChannel, s.onFire, &calf.SubscribeOptions{Group: FireChannel})
}

func (s *Scheduler) load(ctx context.Context, name string) (*Schedule, store.Record, error) {
	rec, err := s.rt.Store().Get(ctx, Kind, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, rec, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, rec, err
	}
	var sc Schedule
	if err := json.Unmarshal(rec.Data, &sc); err != nil {
		return nil, rec, fmt.Errorf("schedule %s: %w", name, err)
	}
	return &sc, rec, nil
}

// update applies fn to the schedule name and writes it back; fn returns
// false to write nothing.
func (s *Scheduler) update(ctx context.Context, name string, fn func(sc *Schedule) (bool, error)) (*Schedule, error) {
	var sc *Schedule
	_, err := store.Update(ctx, s.rt.Store(), Kind, name, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		sc = &Schedule{}
		if err := json.Unmarshal(data, sc); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", name, err)
		}
		ok, err := fn(sc)
		if err != nil || !ok {
			return nil, err
		}
		sc.Updated = s.now().UTC()
		return json.Marshal(sc)
	})
	return sc, err
}

// timerID is the id of the timer of the schedule's firing at.
func timerID(name string, at time.Time) string {
	return "schedule/" + name + "/" + strconv.FormatInt(at.UnixNano(), 10)
}

// arm starts the timer of the schedule's firing at (once: it may exist).
func (s *Scheduler) arm(ctx context.Context, name string, at time.Time, recheck bool) error {
	data, err := json.Marshal(FireEvent{Schedule: name, At: at, Recheck: recheck})
	if err != nil {
		return err
	}
	id := timerID(name, at)
	if recheck {
		id += "/recheck"
	}
	_, err = s.rt.StartTimer(ctx, agent.Timer{ID: id, Due: at, Channel: FireChannel, Data: data, Key: name, EventID: id})
	return err
}

// Add stores a new schedule and arms its first firing. A name that is
// taken is an error matching [ErrExists]; a spec that cannot be
// scheduled one matching [ErrInvalid].
func (s *Scheduler) Add(ctx context.Context, spec Spec) (*Schedule, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	now := s.now().UTC()
	sc := &Schedule{Spec: spec, Created: now, Updated: now}
	sc.Next = spec.next(now, now)
	if sc.Next.IsZero() {
		return nil, fmt.Errorf("%w %s: it never fires", ErrInvalid, spec.Name)
	}
	data, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	if _, err := s.rt.Store().Put(ctx, Kind, spec.Name, data, 0); errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("%w: %s", ErrExists, spec.Name)
	} else if err != nil {
		return nil, fmt.Errorf("schedule %s: add: %w", spec.Name, err)
	}
	if err := s.arm(ctx, spec.Name, sc.Next, false); err != nil {
		return sc, fmt.Errorf("schedule %s: arm its first firing: %w (Resume arms it)", spec.Name, err)
	}
	return sc, nil
}

// Get returns the schedule name, or an error matching [ErrNotFound].
func (s *Scheduler) Get(ctx context.Context, name string) (*Schedule, error) {
	sc, _, err := s.load(ctx, name)
	return sc, err
}

// List returns the schedules, by name.
func (s *Scheduler) List(ctx context.Context) ([]*Schedule, error) {
	var out []*Schedule
	for after := ""; ; {
		recs, err := s.rt.Store().List(ctx, Kind, "", after, 256)
		if err != nil {
			return out, err
		}
		for _, rec := range recs {
			after = rec.ID
			var sc Schedule
			if err := json.Unmarshal(rec.Data, &sc); err != nil {
				return out, fmt.Errorf("schedule %s: %w", rec.ID, err)
			}
			out = append(out, &sc)
		}
		if len(recs) < 256 {
			return out, nil
		}
	}
}

// Pause stops the schedule's firings until Resume; pausing a paused
// schedule changes nothing.
func (s *Scheduler) Pause(ctx context.Context, name string) (*Schedule, error) {
	var next time.Time
	sc, err := s.update(ctx, name, func(sc *Schedule) (bool, error) {
		if sc.Paused {
			return false, nil
		}
		next = sc.Next
		sc.Paused, sc.Next = true, time.Time{}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if !next.IsZero() {
		if _, err := s.rt.StopTimer(ctx, timerID(name, next)); err != nil {
			return sc, fmt.Errorf("schedule %s: pause: %w (its next firing, if it comes, is ignored)", name, err)
		}
	}
	return sc, nil
}

// Resume lets a paused schedule fire again, from its next firing after
// now (the firings missed while it was paused are not run); resuming a
// schedule that is not paused arms its next firing again, if it was not.
func (s *Scheduler) Resume(ctx context.Context, name string) (*Schedule, error) {
	now := s.now().UTC()
	sc, err := s.update(ctx, name, func(sc *Schedule) (bool, error) {
		if !sc.Paused && !sc.Next.IsZero() {
			return false, nil
		}
		sc.Paused, sc.Next = false, sc.Spec.next(now, sc.Created)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return sc, s.arm(ctx, name, sc.Next, false)
}

// Delete removes the schedule; the runs it started are left alone.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	sc, rec, err := s.load(ctx, name)
	if err != nil {
		return err
	}
	if err := s.rt.Store().Delete(ctx, Kind, name, rec.Version); err != nil {
		return fmt.Errorf("schedule %s: delete: %w", name, err)
	}
	if !sc.Next.IsZero() {
		_, _ = s.rt.StopTimer(ctx, timerID(name, sc.Next)) // a stray firing finds no schedule
	}
	return nil
}

// Trigger fires the schedule now, once, whatever its times and its
// pause: its run is started by whichever process serves schedules, with
// the id [RunID](name, now, true), which Trigger returns.
// [Scheduler.TriggerWith] triggers under the caller's idempotency key.
func (s *Scheduler) Trigger(ctx context.Context, name string) (string, error) {
	return s.TriggerWith(ctx, name, nil)
}

// TriggerOptions configure [Scheduler.TriggerWith]. A nil
// *TriggerOptions means the defaults.
type TriggerOptions struct {
	// IdempotencyKey, when set, is the caller's key for this trigger: a
	// trigger of the same schedule under the same key, within the
	// runtime's [agent.RuntimeOptions.IdempotencyWindow] (from any
	// process, after restarts), fires nothing more and returns the run
	// id of the first, which started one run. The key is the schedule's:
	// another schedule's triggers do not share it. Default: none, each
	// call fires the schedule.
	IdempotencyKey string
}

// TriggerWith is [Scheduler.Trigger] with options: under
// [TriggerOptions.IdempotencyKey], the same trigger sent again fires
// once.
func (s *Scheduler) TriggerWith(ctx context.Context, name string, opts *TriggerOptions) (string, error) {
	if _, _, err := s.load(ctx, name); err != nil {
		return "", err
	}
	at := s.now().UTC().Truncate(time.Millisecond)
	id := RunID(name, at, true)
	if opts != nil && opts.IdempotencyKey != "" {
		// The key names the run of its first trigger, whose firing is
		// emitted again (with the same event id: carried out once), in
		// case the process that first triggered stopped before it.
		first, err := s.rt.RunForKey(ctx, "schedule/"+name, opts.IdempotencyKey, struct {
			Schedule string `json:"schedule"`
		}{name}, id)
		if err != nil {
			return "", fmt.Errorf("schedule %s: trigger: %w", name, err)
		}
		if first != id {
			if at, err = triggerTime(name, first); err != nil {
				return "", fmt.Errorf("schedule %s: trigger: %w", name, err)
			}
			id = first
		}
	}
	_, err := s.rt.Client().Emit(ctx, FireChannel, FireEvent{Schedule: name, At: at, Trigger: true},
		calf.WithID("schedule/"+name+"/trigger/"+strconv.FormatInt(at.UnixNano(), 10)), calf.WithKey(name))
	if err != nil {
		return "", fmt.Errorf("schedule %s: trigger: %w", name, err)
	}
	return id, nil
}
