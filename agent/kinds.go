package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// RunView is the view of a run of any kind: a [*RunInfo] for an agent's
// run, a team's or a workflow's own RunInfo for theirs. The runtime's
// by-name controls ([Runtime.LoadRun], [Runtime.Cancel], [Runtime.Pause],
// [Runtime.Resume], [Runtime.SetBudget], [Runtime.Signal]) return one; a type switch gives
// the kind's whole view.
type RunView interface {
	// Ref names the run: its kind, its runner's name and its id.
	Ref() RunRef
	// RunStatus is the run's status.
	RunStatus() RunStatus
}

// RunKind carries out the runtime's by-name controls for the runs of one
// kind other than an agent's: the team and workflow packages each have
// one, which they add to a runtime when they serve or run on it (see
// [Runtime.AddKind]). Each method is given a [RunRef] whose Kind is
// Name's; it returns the run as it stands, as the kind's controls
// document (a cancel may be carried out by the process that serves the
// run, after the method returns).
type RunKind interface {
	// Name is the kind's name, as [RunRef.Kind] gives it.
	Name() string
	// Load returns the view of the run, or an error matching
	// [store.ErrNotFound].
	Load(ctx context.Context, rt *Runtime, run RunRef) (RunView, error)
	// Cancel cancels the run and its child runs of every kind.
	Cancel(ctx context.Context, rt *Runtime, run RunRef, reason string) (RunView, error)
	// Pause asks the run to stop before its next step.
	Pause(ctx context.Context, rt *Runtime, run RunRef, reason string) (RunView, error)
	// Resume lets a paused run go on.
	Resume(ctx context.Context, rt *Runtime, run RunRef) (RunView, error)
	// SetBudget replaces the budget of the run (nil: none), and of its
	// child runs in flight, which get what the new budget leaves them.
	SetBudget(ctx context.Context, rt *Runtime, run RunRef, b *Budget) (RunView, error)
	// Signal sends the signal name with value (JSON) to the run, as
	// [Runtime.Signal] does.
	Signal(ctx context.Context, rt *Runtime, run RunRef, name string, value json.RawMessage) (RunView, error)
}

// AddKind adds the kinds of runs ks to the runtime, so that its by-name
// controls reach their runs; a kind added again replaces nothing. Teams
// and workflows add theirs when they run or are served on rt; a program
// that controls their runs by name alone, with no team or workflow of its
// own, adds them itself: rt.AddKind(team.Kind, workflow.Kind).
func (rt *Runtime) AddKind(ks ...RunKind) {
	if rt == nil {
		return
	}
	var added []string
	rt.kindMu.Lock()
	for _, k := range ks {
		if k == nil || k.Name() == "" || k.Name() == "agent" {
			continue
		}
		if rt.kinds == nil {
			rt.kinds = map[string]RunKind{}
		}
		if _, ok := rt.kinds[k.Name()]; !ok {
			rt.kinds[k.Name()] = k
			added = append(added, k.Name())
		}
	}
	rt.kindMu.Unlock()
	// A process serving timers handles the deadlines of the runs of the
	// kinds it knows.
	rt.subscribeDeadlines(added...)
}

// runKind returns the kind of run that run names, or nil for an agent's
// run; verb says what the caller does, for the error.
func (rt *Runtime) runKind(run RunRef, verb string) (RunKind, error) {
	kind := run.kind()
	if kind == "agent" {
		return nil, nil
	}
	if run.RunID == "" {
		return nil, fmt.Errorf("agent: %s: the run needs a run id (RunRef{Kind: %q, Name: %q})", verb, run.Kind, run.Name)
	}
	rt.kindMu.Lock()
	k := rt.kinds[kind]
	var known []string
	for name := range rt.kinds {
		known = append(known, name)
	}
	rt.kindMu.Unlock()
	if k == nil {
		slices.Sort(known)
		return nil, fmt.Errorf("agent: %s run %s: no kind of run %q on this runtime (it knows agent%s); "+
			"add it with Runtime.AddKind, for example rt.AddKind(team.Kind, workflow.Kind)",
			verb, run.RunID, kind, joinKinds(known))
	}
	return k, nil
}

func joinKinds(names []string) string {
	s := ""
	for _, n := range names {
		s += ", " + n
	}
	return s
}

// agentView returns info as a view, nil when info is nil (not a view
// holding a nil pointer).
func agentView(info *RunInfo, err error) (RunView, error) {
	if info == nil {
		return nil, err
	}
	return info, err
}

// Ref names the run: kind "agent", its agent and its id.
func (r *RunInfo) Ref() RunRef { return RunRef{Kind: "agent", Name: r.Agent, RunID: r.ID} }

// RunStatus is the run's status.
func (r *RunInfo) RunStatus() RunStatus { return r.Status }
