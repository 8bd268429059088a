package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// The runners of an agent, a team and a workflow run on the process's
// local runtime with nothing served first, and read and cancel their runs
// there.
func TestLocalRuntimeServesOnDemand(t *testing.T) {
	ctx := t.Context()
	rt := local.Runtime()
	a := agent.Must(agent.NewText("runner_on_demand", modeltest.NewTestModel(modeltest.Text("agent")), "Answer."))
	b := agent.Must(agent.NewText("runner_on_demand_member", modeltest.NewTestModel(modeltest.Text("team")), "Answer."))
	tm := team.Must(team.NewSequential("runner_on_demand_team", []team.Member{team.AgentMember(b)}, nil))
	w := workflow.New[string]("runner_on_demand_flow", nil).
		Node("echo", workflow.Func(func(_ context.Context, s string) (string, error) { return s + "!", nil })).
		Edge(workflow.Start, "echo").Edge("echo", workflow.End).
		MustBuild()
	id := func(s string) (string, error) { return s, nil }
	for _, tc := range []struct {
		r    runner.Runner
		want string
	}{
		{runner.Agent(a), "agent"},
		{runner.Team(tm), "team"},
		{runner.Workflow(w, "Echoes.", id, id), "flow!"},
	} {
		t.Run(tc.r.Name(), func(t *testing.T) {
			res, err := tc.r.Run(ctx, rt, "flow", nil, nil)
			if err != nil || res.Status != runner.Complete || res.Text != tc.want {
				t.Fatalf("Run: %+v, %v; want %q", res, err, tc.want)
			}
			if got, err := tc.r.Status(ctx, rt, res.RunID); err != nil || got.Status != runner.Complete {
				t.Errorf("Status: %+v, %v", got, err)
			}
			if err := tc.r.Cancel(ctx, rt, res.RunID, "test"); err != nil {
				t.Errorf("Cancel of an ended run: %v", err)
			}
		})
	}
	// An agent's runner reads and cancels a run known by id only.
	r := runner.Agent(a)
	if _, err := r.Status(ctx, rt, "runner-no-such-run"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Status of an unknown run = %v, want store.ErrNotFound", err)
	}
	if err := r.Cancel(ctx, rt, "runner-on-demand-run", "test"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if res, err := r.Status(ctx, rt, "runner-on-demand-run"); err != nil || res.Status != runner.Cancelled {
		t.Errorf("Status of the cancelled run = %+v, %v", res, err)
	}
}

// A nil runtime is an error matching agent.ErrNoRuntime in every method
// of every runner.
func TestNilRuntimeIsAnError(t *testing.T) {
	ctx := t.Context()
	a := agent.Must(agent.NewText("runner_nil", modeltest.NewTestModel(), "Answer."))
	tm := team.Must(team.NewSequential("runner_nil_team", []team.Member{team.AgentMember(a)}, nil))
	w := workflow.New[string]("runner_nil_flow", nil).
		Node("echo", workflow.Func(func(_ context.Context, s string) (string, error) { return s, nil })).
		Edge(workflow.Start, "echo").Edge("echo", workflow.End).
		MustBuild()
	id := func(s string) (string, error) { return s, nil }
	for _, r := range []runner.Runner{runner.Agent(a), runner.Team(tm), runner.Workflow(w, "Echoes.", id, id)} {
		t.Run(r.Name(), func(t *testing.T) {
			if _, err := r.Run(ctx, nil, "hi", nil, nil); !errors.Is(err, agent.ErrNoRuntime) {
				t.Errorf("Run: %v, want agent.ErrNoRuntime", err)
			}
			if _, err := r.Status(ctx, nil, "r1"); !errors.Is(err, agent.ErrNoRuntime) {
				t.Errorf("Status: %v, want agent.ErrNoRuntime", err)
			}
			if err := r.Cancel(ctx, nil, "r1", "x"); !errors.Is(err, agent.ErrNoRuntime) {
				t.Errorf("Cancel: %v, want agent.ErrNoRuntime", err)
			}
			if s, ok := r.(runner.Submitter); ok {
				if _, err := s.Submit(ctx, nil, "hi", nil); !errors.Is(err, agent.ErrNoRuntime) {
					t.Errorf("Submit: %v, want agent.ErrNoRuntime", err)
				}
			}
		})
	}
}
