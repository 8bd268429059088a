package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent"
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
// event, from which a process that serves the workflow starts the step. A
// workflow run has no budget of its own: SetBudget fails with
// [errors.ErrUnsupported], and budgets are set on its agents' runs.
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

func (k kind) SetBudget(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, _ *agent.Budget) (agent.RunView, error) {
	if _, err := k.Load(ctx, rt, ref); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("workflow %s: set the budget of run %s: a workflow run has no budget of its own; set it on its agents' runs: %w", ref.Name, ref.RunID, errors.ErrUnsupported)
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
