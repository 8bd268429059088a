package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// maxDue bounds the firings one firing reads through, after a long
// downtime of a schedule with a short interval.
const maxDue = 100_000

// onFire carries out a firing of [FireChannel].
func (s *Scheduler) onFire(ctx context.Context, msg *calf.Message) error {
	var ev FireEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	sc, _, err := s.load(ctx, ev.Schedule)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted
	}
	if err != nil {
		return err
	}
	now := s.now().UTC()
	switch {
	case ev.Trigger:
		return s.fireTrigger(ctx, sc, ev.At, now)
	case ev.Recheck:
		return s.fireBuffered(ctx, sc, ev.At, now)
	case sc.Pending != nil && sc.Pending.At.Equal(ev.At):
		// Decided before, maybe with its runs started: carried out,
		// whatever happened since (a pause).
	case sc.Paused || !sc.Next.Equal(ev.At):
		return nil // paused, or fired already
	}
	p := sc.Pending
	if p == nil || !p.At.Equal(ev.At) {
		// Decided once, and written before its runs start: a firing
		// carried out again (its process killed midway, its message
		// back after the next firings fell due) does the same.
		if p, err = s.decide(ctx, sc, ev.At, now); err != nil {
			return err
		}
		var cur *Pending
		_, err = s.update(ctx, sc.Name, func(c *Schedule) (bool, error) {
			cur = nil
			switch {
			case c.Paused || !c.Next.Equal(ev.At):
				return false, nil
			case c.Pending != nil && c.Pending.At.Equal(ev.At):
				cur = c.Pending
				return false, nil
			}
			c.Pending, cur = p, p
			return true, nil
		})
		if errors.Is(err, store.ErrNotFound) || (err == nil && cur == nil) {
			return nil // deleted, paused, or fired meanwhile
		}
		if err != nil {
			return err
		}
		p = cur
	}
	for _, f := range p.History {
		if f.RunID != "" {
			if err := s.start(ctx, sc, f.RunID); err != nil {
				return err
			}
		}
	}
	// Arm the next firing, then record this one: a firing whose record
	// fails is carried out again, and starts the same runs.
	if !p.Next.IsZero() {
		if err := s.arm(ctx, sc.Name, p.Next, false); err != nil {
			return err
		}
	}
	if !p.Buffered.IsZero() && !p.Buffered.Equal(sc.Buffered) {
		if err := s.arm(ctx, sc.Name, now.Add(s.recheck), true); err != nil {
			return err
		}
	}
	_, err = s.update(ctx, sc.Name, func(cur *Schedule) (bool, error) {
		if cur.Pending == nil || !cur.Pending.At.Equal(ev.At) {
			return false, nil // recorded already
		}
		if !cur.Paused && cur.Next.Equal(ev.At) {
			cur.Next, cur.Buffered = p.Next, p.Buffered
		}
		cur.Pending = nil
		cur.History = appendHistory(cur.History, p.History...)
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// decide decides what the firing of sc due at does, at now: the firings
// due (this one and those missed since), which start a run, which are
// skipped and why, and the next firing.
func (s *Scheduler) decide(ctx context.Context, sc *Schedule, at, now time.Time) (*Pending, error) {
	due := []time.Time{at}
	next := sc.Spec.next(at, sc.Created)
	for ; !next.IsZero() && !next.After(now) && len(due) < maxDue; next = sc.Spec.next(next, sc.Created) {
		due = append(due, next)
	}
	var run []time.Time
	switch sc.CatchUp {
	case CatchUpLast:
		run = due[len(due)-1:]
	case CatchUpAll:
		for _, t := range due {
			if !t.Before(now.Add(-sc.Window)) {
				run = append(run, t)
			}
		}
		if len(run) > MaxCatchUp {
			run = run[len(run)-MaxCatchUp:]
		}
	default:
		if last := due[len(due)-1]; now.Sub(last) <= sc.Tolerance {
			run = []time.Time{last}
		}
	}
	p := &Pending{At: at, Next: next, Buffered: sc.Buffered}
	for _, t := range due {
		if !slices.Contains(run, t) {
			p.History = append(p.History, Firing{At: t, Fired: now, Skipped: "missed"})
		}
	}
	startedOne := false
	for _, t := range run {
		f := Firing{At: t, Fired: now}
		busy := startedOne
		if !busy && sc.Overlap != OverlapAllow {
			var err error
			if busy, err = s.running(ctx, sc, now); err != nil {
				return nil, err
			}
		}
		switch {
		case busy && sc.Overlap == OverlapSkip:
			f.Skipped = "overlap"
		case busy && sc.Overlap == OverlapBufferOne:
			f.Skipped, p.Buffered = "buffered", t
		default:
			f.RunID = RunID(sc.Name, t, false)
			startedOne = true
		}
		p.History = append(p.History, f)
	}
	return p, nil
}

// fireTrigger starts the run of a Trigger, whatever the overlap.
func (s *Scheduler) fireTrigger(ctx context.Context, sc *Schedule, at, now time.Time) error {
	f := Firing{At: at, Fired: now, RunID: RunID(sc.Name, at, true), Trigger: true}
	if err := s.start(ctx, sc, f.RunID); err != nil {
		return err
	}
	_, err := s.update(ctx, sc.Name, func(cur *Schedule) (bool, error) {
		for _, h := range cur.History {
			if h.RunID == f.RunID {
				return false, nil
			}
		}
		cur.History = appendHistory(cur.History, f)
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// fireBuffered starts the buffered firing once the run before it has
// ended, or looks again later.
func (s *Scheduler) fireBuffered(ctx context.Context, sc *Schedule, at, now time.Time) error {
	if sc.Buffered.IsZero() {
		return nil
	}
	busy, err := s.running(ctx, sc, now)
	if err != nil {
		return err
	}
	if busy {
		return s.arm(ctx, sc.Name, now.Add(s.recheck), true)
	}
	t := sc.Buffered
	f := Firing{At: t, Fired: now, RunID: RunID(sc.Name, t, false)}
	if err := s.start(ctx, sc, f.RunID); err != nil {
		return err
	}
	_, err = s.update(ctx, sc.Name, func(cur *Schedule) (bool, error) {
		if !cur.Buffered.Equal(t) {
			return false, nil
		}
		cur.Buffered = time.Time{}
		cur.History = appendHistory(cur.History, f)
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// appendHistory appends fs to h, keeping the last MaxHistory.
func appendHistory(h []Firing, fs ...Firing) []Firing {
	h = append(h, fs...)
	if len(h) > MaxHistory {
		h = slices.Clone(h[len(h)-MaxHistory:])
	}
	return h
}

// running reports whether the last run the schedule started is still in
// progress. A run not recorded yet counts as in progress for a minute
// after its firing (its input may be on its way), then as gone.
func (s *Scheduler) running(ctx context.Context, sc *Schedule, now time.Time) (bool, error) {
	for i := len(sc.History) - 1; i >= 0; i-- {
		f := sc.History[i]
		if f.RunID == "" {
			continue
		}
		v, err := s.rt.LoadRun(ctx, agent.RunRef{Kind: sc.Kind, Name: sc.Runner, RunID: f.RunID})
		if errors.Is(err, store.ErrNotFound) {
			return now.Sub(f.Fired) < time.Minute, nil
		}
		if err != nil {
			return false, fmt.Errorf("schedule %s: the state of run %s: %w", sc.Name, f.RunID, err)
		}
		return !v.RunStatus().Terminal(), nil
	}
	return false, nil
}

// start starts the run runID of the schedule's runner (once: a run id
// started before starts nothing new).
func (s *Scheduler) start(ctx context.Context, sc *Schedule, runID string) error {
	md := calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID})
	var err error
	switch sc.Kind {
	case "agent":
		err = s.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Kind: "agent", Name: sc.Runner, RunID: runID},
			Input: &agent.InputEvent{Content: sc.Prompt}})
	case "team":
		_, err = s.rt.Client().Emit(ctx, team.InputChannel(sc.Runner), team.InputEvent{Content: sc.Prompt},
			calf.WithID(runID+".input"), calf.WithKey(runID), md)
	case "workflow":
		_, err = s.rt.Client().Emit(ctx, workflow.InputChannel(sc.Runner), workflow.InputEvent{State: sc.State},
			calf.WithID(runID+".input"), calf.WithKey(runID), md)
	default:
		return calf.Permanent(fmt.Errorf("schedule %s: kind %q", sc.Name, sc.Kind))
	}
	if err != nil {
		return fmt.Errorf("schedule %s: start run %s of %s %s: %w", sc.Name, runID, sc.Kind, sc.Runner, err)
	}
	return nil
}
