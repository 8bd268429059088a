package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/workflow"
)

// Kind is the kind of the team runs, for the runtime's by-name controls
// ([agent.Runtime.Cancel], [agent.Runtime.Pause], [agent.Runtime.Resume],
// [agent.Runtime.LoadRun], [agent.Runtime.SetBudget] with a RunRef of
// kind "team"), which need no team's definition: a team that runs or is
// served on a runtime adds it, and a program that controls team runs by
// name alone adds it with rt.AddKind(team.Kind). Its views are
// [*RunInfo].
//
// By name, a cancel ends the team run and every member run in flight, of
// any kind (agents, teams, workflows), as [Team.Cancel] does for the
// members that are [Canceller]s; a run not started yet (its input may be
// on its way) is recorded cancelled, when the RunRef names its team, so
// that it never starts. SetBudget
// records the run's new budget (nil: none; see [RunOptions.Budget]),
// from which the member runs started after it get their part, then sets
// on each member run in flight, of any kind, what the new budget leaves
// it once the member runs that have answered are counted (nil when it is
// nil): an agent's run that its part paused goes on if the new one lets
// it. A member run not started yet, or ended meanwhile, is left alone; a
// run that has ended returns an error matching [agent.ErrRunEnded].
var Kind agent.RunKind = kind{}

type kind struct{}

// errOtherTeam is the error of a RunRef whose run is another team's.
var errOtherTeam = fmt.Errorf("a run of another team: %w", store.ErrNotFound)

func (kind) Name() string { return "team" }

// run loads the team run that ref names, checking its team when ref has
// a name.
func (kind) run(ctx context.Context, rt *agent.Runtime, ref agent.RunRef) (*runState, error) {
	st, err := loadRunState(ctx, rt, ref.RunID)
	if err != nil {
		return nil, err
	}
	if ref.Name != "" && st.Team != ref.Name {
		return nil, fmt.Errorf("team %s: run %s is a run of team %s: %w", ref.Name, ref.RunID, st.Team, errOtherTeam)
	}
	return st, nil
}

func (k kind) Load(ctx context.Context, rt *agent.Runtime, ref agent.RunRef) (agent.RunView, error) {
	st, err := k.run(ctx, rt, ref)
	if err != nil {
		return nil, err
	}
	return st.info(), nil
}

func (k kind) Cancel(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, reason string) (agent.RunView, error) {
	var placeholder *runState
	st, err := k.run(ctx, rt, ref)
	switch {
	case errors.Is(err, store.ErrNotFound) && ref.Name != "" && !errors.Is(err, errOtherTeam):
		// Not started yet (its input may be on its way): recorded
		// cancelled, it never starts.
		placeholder = &runState{RunID: ref.RunID, Team: ref.Name}
		st = placeholder
	case err != nil:
		return nil, err
	}
	why := fmt.Sprintf("team %s: run %s was cancelled: %s", st.Team, ref.RunID, reason)
	err = cancelRun(ctx, rt, ref.RunID, reason, placeholder, func(c memberCall) error {
		return cancelMemberRun(ctx, rt, c, why)
	})
	if err != nil {
		return nil, err
	}
	return k.Load(ctx, rt, ref)
}

// cancelMemberRun cancels the member run c, of whichever kind its record
// says, by name: a team run's definition is not needed.
func cancelMemberRun(ctx context.Context, rt *agent.Runtime, c memberCall, reason string) error {
	ref, ok, err := memberRef(ctx, rt, c)
	if err != nil || !ok {
		return err // a run of another kind, or not started: its reply is ignored
	}
	_, err = rt.Cancel(ctx, ref, reason)
	return err
}

// memberRef names the member run c by the kind its record says, for the
// runtime's controls by name (whose kinds it adds to rt); it reports false
// for a run not started, or of a kind other than an agent's, a team's or
// a workflow's.
func memberRef(ctx context.Context, rt *agent.Runtime, c memberCall) (agent.RunRef, bool, error) {
	rt.AddKind(Kind, workflow.Kind)
	if rec, err := rt.Store().Get(ctx, store.KindRun, c.RunID); err == nil {
		run, err := agent.DecodeRunInfo(rec.Data)
		if err != nil {
			return agent.RunRef{}, false, err
		}
		return agent.RunRef{Kind: "agent", Name: run.Agent, RunID: c.RunID}, true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return agent.RunRef{}, false, err
	}
	for _, kind := range []string{"team", "workflow"} {
		ref := agent.RunRef{Kind: kind, Name: c.Member, RunID: c.RunID}
		if _, err := rt.LoadRun(ctx, ref); err == nil {
			return ref, true, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return agent.RunRef{}, false, err
		}
	}
	return agent.RunRef{}, false, nil
}

func (k kind) Pause(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, reason string) (agent.RunView, error) {
	if _, err := k.run(ctx, rt, ref); err != nil {
		return nil, err
	}
	return view(pauseRun(ctx, rt, ref.RunID, reason))
}

func (k kind) Resume(ctx context.Context, rt *agent.Runtime, ref agent.RunRef) (agent.RunView, error) {
	if _, err := k.run(ctx, rt, ref); err != nil {
		return nil, err
	}
	return view(resumeRun(ctx, rt, ref.RunID))
}

func (k kind) SetBudget(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, b *agent.Budget) (agent.RunView, error) {
	if _, err := k.run(ctx, rt, ref); err != nil {
		return nil, err
	}
	if b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("team: set the budget of run %s: %w", ref.RunID, err)
		}
	}
	st, err := runlife.Change(ctx, control(rt, ref.RunID), func(st *runState) (bool, error) {
		st.Budget = b
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("team: set the budget of run %s: %w", ref.RunID, err)
	}
	if err := setMemberBudgets(ctx, rt, st); err != nil {
		return st.info(), fmt.Errorf("team %s: set the budget of run %s: %w", st.Team, ref.RunID, err)
	}
	return k.Load(ctx, rt, ref)
}

// setMemberBudgets sets on each member run in flight of the run st what
// st's budget leaves it (nil when st has none), through the runtime's
// controls by name. A member run not started, or ended, is left alone.
func setMemberBudgets(ctx context.Context, rt *agent.Runtime, st *runState) error {
	b := st.childBudget()
	var errs []error
	for _, c := range st.Calls {
		if c.Done {
			continue
		}
		ref, ok, err := memberRef(ctx, rt, c)
		if err == nil && ok {
			_, err = rt.SetBudget(ctx, ref, b)
		}
		if err != nil && !errors.Is(err, agent.ErrRunEnded) && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("member %s (run %s): %w", c.Member, c.RunID, err))
		}
	}
	return errors.Join(errs...)
}

// view returns info as a view, nil when info is nil (not a view holding
// a nil pointer).
func view(info *RunInfo, err error) (agent.RunView, error) {
	if info == nil {
		return nil, err
	}
	return info, err
}

// Ref names the run: kind "team", its team and its id.
func (r *RunInfo) Ref() agent.RunRef { return agent.RunRef{Kind: "team", Name: r.Team, RunID: r.ID} }

// RunStatus is the run's status.
func (r *RunInfo) RunStatus() agent.RunStatus { return r.Status }

// Signal sends the signal to each member run in progress of the team
// run, of any kind, where the member's waits take it. A team run with no
// member run in progress has nothing to take it: that is an error, and
// nothing is kept.
func (k kind) Signal(ctx context.Context, rt *agent.Runtime, ref agent.RunRef, name string, value json.RawMessage) (agent.RunView, error) {
	st, err := k.run(ctx, rt, ref)
	if err != nil {
		return nil, fmt.Errorf("team: signal %s to run %s: %w", name, ref.RunID, err)
	}
	if st.Status.Terminal() {
		return st.info(), fmt.Errorf("team %s: signal %s to run %s: %w with status %s", st.Team, name, ref.RunID, agent.ErrRunEnded, st.Status)
	}
	sent := 0
	var errs []error
	for _, c := range st.Calls {
		if c.Done {
			continue
		}
		mref, ok, err := memberRef(ctx, rt, c)
		if err == nil && ok {
			_, err = rt.Signal(ctx, mref, name, value)
		}
		switch {
		case err == nil && ok:
			sent++
		case err != nil && !errors.Is(err, agent.ErrRunEnded) && !errors.Is(err, store.ErrNotFound):
			errs = append(errs, fmt.Errorf("member %s (run %s): %w", c.Member, c.RunID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st.info(), fmt.Errorf("team %s: signal %s to run %s: %w", st.Team, name, ref.RunID, err)
	}
	if sent == 0 {
		return st.info(), fmt.Errorf("team %s: signal %s to run %s: no member run is in progress to take it; signal a member's run, or send it again when one is", st.Team, name, ref.RunID)
	}
	return st.info(), nil
}
