package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// A pause is recorded in the run's state (runState.Pause) and takes
// effect at a step boundary, by the handler that would start the next
// node: the commit that moves the run on from a completed step (moveOn),
// or the step handler of a node not yet started (onStep). Either records
// the pause in effect (Pause.Step = the step that waits) in the same
// compare-and-swap as the transition, so emitState, which emits what
// follows from the state, emits the pause event instead of the step. A
// resume is a transition of its own, whose events are the resume event
// and the step's events again, with ids of their own (the count of
// resumes in them), through the same emitPending as every transition.

// Paused reports whether the pause of the run is in effect: it waits,
// holding no goroutine, for [Workflow.Resume].
func (st *runState) Paused() bool {
	return st.Pause != nil && st.Status == RunRunning && st.Pause.Step == st.Step
}

// RunEnded returns the status of a run that has ended, "" while it goes
// on (an interrupted run has not ended): with the methods below, the
// run's state is a [runlife.Pausable].
func (st *runState) RunEnded() string {
	if st.Status.Terminal() {
		return string(st.Status)
	}
	return ""
}

// PauseField returns the address of the run's pause.
func (st *runState) PauseField() **agent.PauseState { return &st.Pause }

// CountResume records a resume of the pause in effect, a transition of
// its own: the step it lets go on, whose events it emits again.
func (st *runState) CountResume() {
	st.Seq++
	st.Unpaused++
	st.UnpausedStep = st.Step
}

// ResumeUnsent reports whether the events of the run's last resume may
// not all have been emitted: it let the current step go on, and the
// transition is not recorded as emitted.
func (st *runState) ResumeUnsent() bool {
	return st.Status == RunRunning && st.Emitted < st.Seq && st.unpausedHere()
}

// pauseHere puts an asked pause in effect at the run's current step,
// which has not started.
func (st *runState) pauseHere(now time.Time) {
	if st.Status != RunRunning || st.Pause == nil || st.Pause.Step == st.Step {
		return
	}
	p := *st.Pause
	p.Step, p.PausedAt = st.Step, now
	st.Pause = &p
}

// unpausedHere reports whether the run's current step was let go on by a
// resume: its events carry the count of resumes in their ids.
func (st *runState) unpausedHere() bool {
	return st.Unpaused > 0 && st.UnpausedStep == st.Step
}

// stepEventID is the id of the step event of node at the run's current
// step.
func (st *runState) stepEventID(node string) string {
	id := stepID(st.RunID, st.Step, node)
	if st.unpausedHere() {
		id = runlife.ResumedID(id, st.Unpaused)
	}
	return id
}

// Pause asks the run runID to stop before its next step, for reason: the
// node in progress finishes (the branches of a parallel step in progress
// all finish) and its checkpoint is written, and the run then waits, with
// nothing but its stored state, until [Workflow.Resume] from any process.
// A pause event on [PauseChannel] says when it took effect;
// [RunInfo.Paused] reports it. Pausing a paused run changes nothing; a run
// that has ended returns an error matching [agent.ErrRunEnded], an
// unknown one an error matching [store.ErrNotFound]. An interrupted run
// that is paused waits for its answer, and its pause takes effect after
// the answered node. Run, Wait and RunStream go on waiting through a
// pause (RunStream yields its pause events). A nil rt is an error
// matching [agent.ErrNoRuntime].
func (w *Workflow[S]) Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	_, err := pauseRun(ctx, rt, w.name, runID, reason)
	return err
}

// Resume lets a paused run go on: a run whose pause is in effect starts
// the step it waits for, in whichever process serves the workflow; a run
// whose pause has not taken effect yet goes on as if it had not been
// paused. Resuming a run that is not paused changes nothing (but for
// emitting again what a resume that failed halfway did not); a run that
// has ended returns an error matching [agent.ErrRunEnded]. A nil rt is an error
// matching [agent.ErrNoRuntime].
func (w *Workflow[S]) Resume(ctx context.Context, rt *agent.Runtime, runID string) error {
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return err
	}
	st, _, err := resumeRun(ctx, rt, w.name, runID)
	if err != nil {
		return err
	}
	// What is not emitted yet, the events of the resume among them.
	if st.Status == RunRunning && st.Emitted < st.Seq {
		h := &handlers[S]{w: w, rt: rt}
		if err := h.emitPending(ctx, st); err != nil {
			return fmt.Errorf("workflow %s: resume run %s: %w", w.name, runID, err)
		}
	}
	return nil
}

// pauseRun pauses the run runID of the workflow named workflow as
// [Workflow.Pause] does, and returns the run as it stands.
func pauseRun(ctx context.Context, rt *agent.Runtime, workflow, runID, reason string) (*RunInfo, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: pause run %s: %w", workflow, runID, agent.ErrNoRuntime)
	}
	st, err := runlife.Pause(ctx, control(rt, workflow, runID), &agent.PauseState{Reason: reason, RequestedAt: rt.Client().Now()})
	if err != nil {
		return nil, fmt.Errorf("workflow %s: pause run %s: %w", workflow, runID, err)
	}
	return st.info(), nil
}

// resumeByName resumes the run runID of the workflow named workflow as
// [Workflow.Resume] does, with no workflow's definition (see [Kind]): it
// records the resume and publishes the resume event, from which a process
// that serves the workflow starts the step. It returns the run as it
// stands.
func resumeByName(ctx context.Context, rt *agent.Runtime, workflow, runID string) (*RunInfo, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: resume run %s: %w", workflow, runID, agent.ErrNoRuntime)
	}
	st, send, err := resumeRun(ctx, rt, workflow, runID)
	if err != nil {
		return nil, err
	}
	if send {
		if err := emitUnpause(ctx, rt, st); err != nil {
			return st.info(), fmt.Errorf("workflow %s: resume run %s: %w", workflow, runID, err)
		}
	}
	return st.info(), nil
}

// resumeRun records the resume of a run: a pause in effect ends with a
// transition (whose events the caller emits), an asked one is forgotten.
// It reports whether the events of the run's last resume are to be
// emitted.
func resumeRun(ctx context.Context, rt *agent.Runtime, workflow, runID string) (*runState, bool, error) {
	st, send, err := runlife.Resume(ctx, control(rt, workflow, runID))
	if err != nil {
		return nil, false, fmt.Errorf("workflow %s: resume run %s: %w", workflow, runID, err)
	}
	return st, send, nil
}

// control returns the update of the record of the run runID of the
// workflow named workflow, for the run controls (see [runlife.Change]).
func control(rt *agent.Runtime, workflow, runID string) runlife.Update[*runState] {
	r := runlife.Records[*runState]{Store: rt.Store(), Kind: store.KindWorkflow, Decode: decodeRunState}
	return r.Update(recordID(workflow, runID), runID)
}

// emitUnpause emits the resume event of the run's last resume.
func emitUnpause(ctx context.Context, rt *agent.Runtime, st *runState) error {
	_, err := rt.Client().Emit(ctx, PauseChannel(st.Workflow), agent.PauseEvent{Step: st.Step},
		calf.WithID(runlife.ResumeID(st.RunID, st.Step, st.Unpaused)), calf.WithKey(st.RunID),
		calf.WithMetadata(calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID}))
	return err
}

// pauseTakesEffect records that the run, asked to pause, stops before
// node, the node of its current step, which has not started, and emits
// the pause. A run resumed meanwhile runs the node.
func (h *handlers[S]) pauseTakesEffect(ctx context.Context, msg *calf.Message, st *runState, node string) error {
	step, now := st.Step, h.rt.Client().Now()
	st, changed, err := h.commit(ctx, st.RunID, func(st *runState) bool {
		if st.Pause == nil || st.Paused() || !st.pending(step, node) || st.FanOut != "" || st.resumed() {
			return false
		}
		st.Seq++
		st.pauseHere(now)
		return true
	})
	switch {
	case err != nil:
		return err
	case changed:
		return h.emitPending(ctx, st)
	case st.Pause == nil && st.pending(step, node) && h.w.runs(st, node) && !st.resumed():
		return h.execute(ctx, st, node)
	}
	return h.stale(ctx, msg, st)
}

// onPause handles the events of the pause channel: a resume published by
// a process without the workflow's definition (a resume by name) is followed by
// the step's events, which need it.
func (h *handlers[S]) onPause(ctx context.Context, msg *calf.Message) error {
	run, err := runOf(msg)
	if err != nil {
		return err
	}
	st, err := h.load(ctx, run)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return h.stale(ctx, msg, st)
}
