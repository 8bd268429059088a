package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// RunSummary describes an agent, team or workflow run from its stored
// state.
type RunSummary struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // "agent", "team" or "workflow"
	Name string `json:"name"` // the agent's, team's or workflow's
	// Status is the run's status, or "paused" (or "pausing", until the
	// step in progress ends) when it is paused.
	Status  string    `json:"status"`
	Step    int       `json:"step"`
	Session string    `json:"session,omitempty"`
	Parent  string    `json:"parent,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Reason is why the run failed, was cancelled or is paused.
	Reason string `json:"reason,omitempty"`
	// Prompt is the text the run was started with: an agent run's first
	// user message of its own (after the session's history), a team
	// run's task; empty for a workflow run, whose input is its state, and
	// for an agent run whose stored messages no longer begin with it.
	Prompt string `json:"prompt,omitempty"`
}

// Statuses lists the statuses a [RunFilter] may ask for.
var Statuses = []string{"running", "paused", "pausing", "interrupted", "complete", "failed", "cancelled", "handed_off"}

// RunFilter selects the runs [Runs] returns.
type RunFilter struct {
	// Status, when set, is the status of the runs wanted: one of
	// [Statuses].
	Status string
	// Name, when set, is the agent or team whose runs are wanted.
	Name string
	// Keep, when set, is asked about each run that passes the filters
	// above; it may read the store (for instance, whose run it is).
	Keep func(context.Context, RunSummary) (bool, error)
	// Limit is how many runs at most, the newest first. Default: 20.
	Limit int
}

// SummarizeAgentRun summarizes an agent run.
func SummarizeAgentRun(st *agent.RunInfo) RunSummary {
	s := RunSummary{ID: st.ID, Kind: "agent", Name: st.Agent, Status: string(st.Status), Step: st.Step, Session: st.SessionID,
		Parent: st.Parent, Started: st.StartedAt, Ended: st.EndedAt, Reason: st.Error}
	if st.Pause != nil {
		s.pause(st.Paused, st.Status.Terminal(), st.Pause.Reason)
	}
	if h := st.HistoryLen; !st.Partial && h >= 0 && h < len(st.Messages) && st.Messages[h].Role == model.RoleUser {
		s.Prompt = st.Messages[h].Text()
	}
	return s
}

// pause sets the status of a run asked to pause: paused once it is, and
// pausing until then, unless it ended meanwhile.
func (s *RunSummary) pause(paused, ended bool, reason string) {
	switch {
	case paused:
		s.Status, s.Reason = "paused", reason
	case !ended:
		s.Status, s.Reason = "pausing", reason
	}
}

// SummarizeTeamRun summarizes a team run.
func SummarizeTeamRun(st *team.RunInfo) RunSummary {
	s := RunSummary{ID: st.ID, Kind: "team", Name: st.Team, Status: string(st.Status), Step: st.Step, Session: st.SessionID,
		Parent: st.Parent, Started: st.StartedAt, Ended: st.EndedAt, Reason: st.Error, Prompt: st.Task}
	if st.Pause != nil {
		s.pause(st.Paused, st.Status.Terminal(), st.Pause.Reason)
	}
	return s
}

// SummarizeWorkflowRun summarizes a workflow run: a failed run's status
// is "failed", an interrupted one's "interrupted" (it waits for its
// answer, even when it is asked to pause), a paused one's "paused" (or
// "pausing" until the step in progress ends).
func SummarizeWorkflowRun(st *workflow.RunInfo) RunSummary {
	s := RunSummary{ID: st.ID, Kind: "workflow", Name: st.Workflow, Status: string(st.Status), Step: st.Step,
		Parent: st.Parent, Started: st.StartedAt, Ended: st.EndedAt, Reason: st.Error}
	switch {
	case st.Status == workflow.RunFailed:
		s.Status = "failed"
	case st.Pause != nil && st.Status != workflow.RunInterrupted:
		s.pause(st.Paused, st.Status.Terminal(), st.Pause.Reason)
	}
	return s
}

// SummarizeView returns the summary of v, the view of a run of any kind
// (as the runtime's by-name controls return it).
func SummarizeView(v agent.RunView) RunSummary {
	switch v := v.(type) {
	case *agent.RunInfo:
		return SummarizeAgentRun(v)
	case *team.RunInfo:
		return SummarizeTeamRun(v)
	case *workflow.RunInfo:
		return SummarizeWorkflowRun(v)
	}
	ref := v.Ref()
	return RunSummary{ID: ref.RunID, Kind: ref.Kind, Name: ref.Name, Status: string(v.RunStatus())}
}

// workflowRun returns the view of the workflow run id, whichever
// workflow's it is: its record is named by both, so the records are read
// until it is found.
func workflowRun(ctx context.Context, st store.Store, id string) (*workflow.RunInfo, error) {
	for after := ""; ; {
		recs, err := st.List(ctx, store.KindWorkflow, "", after, 500)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if _, run, _ := strings.Cut(rec.ID, "/"); run == id {
				return workflow.DecodeRunInfo(rec.Data)
			}
		}
		if len(recs) < 500 {
			return nil, fmt.Errorf("no workflow run %s: %w", id, store.ErrNotFound)
		}
		after = recs[len(recs)-1].ID
	}
}

// Run is a run of an agent, a team or a workflow, as [LoadRun] reads it:
// its summary, and the view of its kind. Exactly one of Agent, Team and
// Workflow is set, the one Summary.Kind names.
type Run struct {
	Summary  RunSummary        `json:"summary"`
	Agent    *agent.RunInfo    `json:"agent,omitempty"`
	Team     *team.RunInfo     `json:"team,omitempty"`
	Workflow *workflow.RunInfo `json:"workflow,omitempty"`
	// Queued is set, alone, for a run that waits under flow control
	// before it starts, and so has no record of its kind yet.
	Queued *agent.QueuedRun `json:"queued,omitempty"`
}

// View returns the view the run has, of its kind: an *agent.RunInfo, a
// *team.RunInfo or a *workflow.RunInfo.
func (r *Run) View() agent.RunView {
	switch {
	case r.Team != nil:
		return r.Team
	case r.Workflow != nil:
		return r.Workflow
	case r.Queued != nil:
		return r.Queued
	}
	return r.Agent
}

// LoadRun returns the agent, team or workflow run id from st. Its view
// is made from its record alone: an agent run's messages may be the last
// ones only ([agent.RunInfo.Partial]; [agent.Runtime.LoadRun] reads them
// all). A workflow run is found among the records of every workflow
// (their ids are "{workflow}/{run}"), which takes a read of them all. It
// fails with an error wrapping [store.ErrNotFound] when st has no run
// id, and one matching [agent.ErrCorruptState] when the record is not one
// this version reads. A run that waits under flow control before it
// starts, with no record yet, is a Run with Queued set, of status
// "queued".
func LoadRun(ctx context.Context, st store.Store, id string) (*Run, error) {
	rec, err := st.Get(ctx, store.KindRun, id)
	if err == nil {
		rs, err := agent.DecodeRunInfo(rec.Data)
		if err != nil {
			return nil, err
		}
		return &Run{Summary: SummarizeAgentRun(rs), Agent: rs}, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	rec, err = st.Get(ctx, store.KindTeam, id)
	if err == nil {
		ts, err := team.DecodeRunInfo(rec.Data)
		if err != nil {
			return nil, err
		}
		return &Run{Summary: SummarizeTeamRun(ts), Team: ts}, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	ws, err := workflowRun(ctx, st, id)
	if errors.Is(err, store.ErrNotFound) {
		q, qerr := agent.LoadQueuedRun(ctx, st, id)
		if errors.Is(qerr, store.ErrNotFound) {
			return nil, fmt.Errorf("no agent, team or workflow run %s: %w", id, store.ErrNotFound)
		}
		if qerr != nil {
			return nil, qerr
		}
		return &Run{Summary: SummarizeView(q), Queued: q}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Run{Summary: SummarizeWorkflowRun(ws), Workflow: ws}, nil
}

// Summarize returns the summary of the agent, team or workflow run id.
func Summarize(ctx context.Context, st store.Store, id string) (RunSummary, error) {
	r, err := LoadRun(ctx, st, id)
	if err != nil {
		return RunSummary{}, err
	}
	return r.Summary, nil
}

// Runs returns the agent, team and workflow runs of st that f selects, the newest
// first. It reads every run record of the store: it is meant for a person
// looking at runs, not for a hot path.
func Runs(ctx context.Context, st store.Store, f *RunFilter) ([]RunSummary, error) {
	var o RunFilter
	if f != nil {
		o = *f
	}
	if o.Limit <= 0 {
		o.Limit = 20
	}
	if o.Status != "" && !slices.Contains(Statuses, o.Status) {
		return nil, fmt.Errorf("runner: no run status %q: use one of %v", o.Status, Statuses)
	}
	var runs []RunSummary
	for _, kind := range []string{store.KindRun, store.KindTeam, store.KindWorkflow} {
		for after := ""; ; {
			recs, err := st.List(ctx, kind, "", after, 500)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				var s RunSummary
				if kind == store.KindRun {
					rs, err := agent.DecodeRunInfo(rec.Data)
					if err != nil || rs.Step == 0 {
						continue // not begun, or not a run this version reads
					}
					s = SummarizeAgentRun(rs)
				} else if kind == store.KindTeam {
					ts, err := team.DecodeRunInfo(rec.Data)
					if err != nil {
						continue
					}
					s = SummarizeTeamRun(ts)
				} else {
					ws, err := workflow.DecodeRunInfo(rec.Data)
					if err != nil {
						continue
					}
					s = SummarizeWorkflowRun(ws)
				}
				if o.Status != "" && s.Status != o.Status || o.Name != "" && s.Name != o.Name {
					continue
				}
				if o.Keep != nil {
					keep, err := o.Keep(ctx, s)
					if err != nil {
						return nil, err
					}
					if !keep {
						continue
					}
				}
				runs = append(runs, s)
			}
			if len(recs) < 500 {
				break
			}
			after = recs[len(recs)-1].ID
		}
	}
	slices.SortFunc(runs, func(a, b RunSummary) int {
		return cmp.Or(b.Started.Compare(a.Started), cmp.Compare(a.ID, b.ID))
	})
	return runs[:min(len(runs), o.Limit)], nil
}
