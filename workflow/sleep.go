package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// SleepError is what a function node returns, with its new state, to
// have the run go on after a while: the node is complete (its state is
// the next checkpoint) and the next step starts at the wake time, not at
// once. Make one with [Sleep] or [SleepUntil].
//
// The wait is a durable timer ([agent.Timer]) in the store: no goroutine
// and no message waits for it, the run survives restarts meanwhile, and
// whichever process serves the workflow when it is due starts the step,
// once. [RunInfo.SleepingUntil] says when; a pause, a cancel and a
// budget act on a sleeping run as on any other (a run paused while it
// sleeps and resumed after the wake time goes on at once).
type SleepError struct {
	// For is how long the run waits from the node's end; Until, when set,
	// is when it goes on instead.
	For   time.Duration
	Until time.Time
}

// Sleep returns the error with which a function node has the run go on
// after d: return s, workflow.Sleep(time.Hour). A d of zero or less goes
// on at once.
func Sleep(d time.Duration) error { return &SleepError{For: d} }

// SleepUntil returns the error with which a function node has the run go
// on at t. A t in the past goes on at once.
func SleepUntil(t time.Time) error { return &SleepError{Until: t} }

func (e *SleepError) Error() string {
	if !e.Until.IsZero() {
		return "workflow: sleep until " + e.Until.Format(time.RFC3339)
	}
	return "workflow: sleep for " + e.For.String()
}

// wake returns when a run that a node left at now goes on.
func (e *SleepError) wake(now time.Time) time.Time {
	if !e.Until.IsZero() {
		return e.Until
	}
	return now.Add(e.For)
}

// sleepAfter records that the run's current step, which it just moved
// to at now, starts at wake: a node before it slept. A wake not after now
// starts it at once.
func (st *runState) sleepAfter(wake, now time.Time) {
	st.SleepUntil, st.SleepStep = time.Time{}, 0
	if st.Status == RunRunning && wake.After(now) {
		st.SleepUntil, st.SleepStep = wake.UTC(), st.Step
	}
}

// sleeping reports whether the run's current step waits for its wake
// time.
func (st *runState) sleeping() bool {
	return st.Status == RunRunning && !st.SleepUntil.IsZero() && st.SleepStep == st.Step
}

// timerPrefix is the prefix of the ids of the run's timers.
func timerPrefix(workflow, run string) string { return "workflow/" + workflow + "/" + run + "/" }

// emitStep emits the step event of node at the run's current step, or,
// while the run sleeps, starts the timer that emits it at the wake time
// (the same event, with the same id).
func (h *handlers[S]) emitStep(ctx context.Context, st *runState, node, key string) error {
	ev := StepEvent{Step: st.Step, Node: node}
	id := st.stepEventID(node)
	md := calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID}
	if !st.sleeping() || !st.SleepUntil.After(h.rt.Client().Now()) {
		_, err := h.rt.Client().Emit(ctx, StepChannel(h.w.name), ev, calf.WithID(id), calf.WithKey(key), calf.WithMetadata(md))
		return err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = h.rt.StartTimer(ctx, agent.Timer{
		ID: timerPrefix(h.w.name, st.RunID) + id, Due: st.SleepUntil, Channel: StepChannel(h.w.name),
		Data: data, Key: key, Metadata: md, EventID: id,
	})
	if err != nil {
		return fmt.Errorf("workflow %s: run %s: start the timer of step %d: %w", h.w.name, st.RunID, st.Step, err)
	}
	return nil
}

// stopTimers removes the timers of a run that ended.
func stopTimers(ctx context.Context, rt *agent.Runtime, workflow, run string) error {
	ts, err := rt.Timers(ctx, timerPrefix(workflow, run))
	if err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := rt.StopTimer(ctx, t.ID); err != nil {
			return err
		}
	}
	return nil
}
