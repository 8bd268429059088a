package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// Kind is the kind of the workflow runs, for the runtime's by-name
// controls ([agent.Runtime.Cancel], [agent.Runtime.Pause],
// [agent.Runtime.Resume], [agent.Runtime.LoadRun],
// [agent.Runtime.SetBudget] with a RunRef of kind "workflow", whose Name
// is the workflow's), which need no workflow's definition: a workflow that
// runs or is served on a runtime adds it, and a program that controls
// workflow runs by name alone adds it with rt.AddKind(workflow.Kind). Its
// views are [*RunInfo].
//
// By name, a cancel is a request: it publishes a [CancelEvent], and a
// process that serves the workflow cancels the run as [Workflow.Cancel]
// does, its child runs of every kind with it; the view returned is still
// running until then. A resume records the resume and publishes its
// event, from which a process that serves the workflow starts the step.
// SetBudget records the run's new budget (nil: none; see
// [RunOptions.Budget]), from which the child runs started after it get
// their part, then sets on each child run in flight of the current step
// (of an agent node or a sub-workflow) what the new budget leaves it once
// the child runs that have finished are counted (nil when it is nil): an
// agent's run that its part paused goes on if the new one lets it. A
// child run not started yet, or ended meanwhile, is left alone, and so
// are those of a run recorded by a version that did not name its step's
// child runs; a run that has ended returns an error matching
// [agent.ErrRunEnded].
var Kind agent.RunKind = kind{}

type kind struct{}

func (kind) Name() string { return "workflow" }

// check checks that ref names a workflow's run.
func (kind) check(ref agent.RunRef, verb string) error {
	if ref.Name == "" {
		return fmt.Errorf("workflow: %s run %s: the RunRef needs the workflow's name (a workflow run's id is unique within its workflow)", verb, ref.RunID)
	}
	return nil
}

func (k kind) Load(ctx context.Context, rt *agent.Runtime, ref agent.RunRef) (agent.RunView, error) {
	if err := k.check(ref, "load"); err != nil {
		return nil, err
	}
	return view(loadRun(ctx, rt, ref.Name, ref.RunID))
}

func (k kind) Cancel(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, reason string) (agent.RunView, error) {
	if err := k.check(ref, "cancel"); err != nil {
		return nil, err
	}
	return view(requestCancel(ctx, rt, ref.Name, ref.RunID, reason))
}

func (k kind) Pause(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, reason string) (agent.RunView, error) {
	if err := k.check(ref, "pause"); err != nil {
		return nil, err
	}
	return view(pauseRun(ctx, rt, ref.Name, ref.RunID, reason))
}

func (k kind) Resume(ctx context.Context, rt *agent.Runtime, ref agent.RunRef) (agent.RunView, error) {
	if err := k.check(ref, "resume"); err != nil {
		return nil, err
	}
	return view(resumeByName(ctx, rt, ref.Name, ref.RunID))
}

func (k kind) SetBudget(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, b *agent.Budget) (agent.RunView, error) {
	if err := k.check(ref, "set the budget of"); err != nil {
		return nil, err
	}
	if b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("workflow %s: set the budget of run %s: %w", ref.Name, ref.RunID, err)
		}
	}
	st, err := runlife.Change(ctx, control(rt, ref.Name, ref.RunID), func(st *runState) (bool, error) {
		st.Budget = b
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflow %s: set the budget of run %s: %w", ref.Name, ref.RunID, err)
	}
	if err := setChildBudgets(ctx, rt, st); err != nil {
		return st.info(), fmt.Errorf("workflow %s: set the budget of run %s: %w", ref.Name, ref.RunID, err)
	}
	return k.Load(ctx, rt, ref)
}

// setChildBudgets sets on each child run in flight of the run st's
// current step what st's budget leaves it (nil when st has none), through
// the runtime's controls by name. A child run not started, or ended, is
// left alone.
func setChildBudgets(ctx context.Context, rt *agent.Runtime, st *runState) error {
	if st.Status != RunRunning || st.Paused() {
		return nil // a paused step has started nothing
	}
	b := st.childBudget()
	var errs []error
	for _, c := range st.Children {
		if bs := st.Branches[c.Node]; bs != nil && bs.Done {
			continue
		}
		ref := agent.RunRef{Kind: c.Kind, Name: c.Name, RunID: childRunID(st.RunID, st.Step, c.Node)}
		if _, err := rt.SetBudget(ctx, ref, b); err != nil && !errors.Is(err, agent.ErrRunEnded) && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("node %q (%s %s, run %s): %w", c.Node, c.Kind, c.Name, ref.RunID, err))
		}
	}
	return errors.Join(errs...)
}

// loadRun returns the view of the run runID of the workflow named
// workflow, or an error matching [store.ErrNotFound].
func loadRun(ctx context.Context, rt *agent.Runtime, workflow, runID string) (*RunInfo, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: run %s: %w", workflow, runID, agent.ErrNoRuntime)
	}
	rec, err := rt.Store().Get(ctx, store.KindWorkflow, recordID(workflow, runID))
	if err != nil {
		return nil, fmt.Errorf("workflow %s: run %s: %w", workflow, runID, err)
	}
	st, err := decodeRunState(rec.Data)
	if err != nil {
		return nil, err
	}
	return st.info(), nil
}

// view returns info as a view, nil when info is nil (not a view holding
// a nil pointer).
func view(info *RunInfo, err error) (agent.RunView, error) {
	if info == nil {
		return nil, err
	}
	return info, err
}

// Ref names the run: kind "workflow", its workflow and its id.
func (r *RunInfo) Ref() agent.RunRef {
	return agent.RunRef{Kind: "workflow", Name: r.Workflow, RunID: r.ID}
}

// RunStatus is the run's status, as an agent's run status (an
// interrupted run's is "interrupted").
func (r *RunInfo) RunStatus() agent.RunStatus { return agent.RunStatus(r.Status) }

func (k kind) Signal(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, name string, value json.RawMessage) (agent.RunView, error) {
	if err := k.check(ref, "signal"); err != nil {
		return nil, err
	}
	return view(signalRun(ctx, rt, ref.Name, ref.RunID, name, value))
}
