package team_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// On the process's local runtime a team needs no Serve: its first run
// serves it, and its runs of its members serve them, agents, teams and
// workflows alike. The functions and methods that read and control its
// runs find them there.
func TestLocalRuntimeServesOnDemand(t *testing.T) {
	ctx := runCtx(t)
	rt := local.Runtime()
	a := agent.Must(agent.NewText("on_demand_member", modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two"), modeltest.Text("three")), ""))
	b := agent.Must(agent.NewText("on_demand_nested_member", modeltest.NewTestModel(modeltest.Text("b1"), modeltest.Text("b2"), modeltest.Text("b3")), ""))
	nested := team.Must(team.NewSequential("on_demand_nested", []team.Member{team.AgentMember(b)}, nil))
	type text struct{ S string }
	w := workflow.New[text]("on_demand_shout", nil).
		Node("shout", workflow.Func(func(_ context.Context, s text) (text, error) {
			s.S += "!"
			return s, nil
		})).
		Edge(workflow.Start, "shout").Edge("shout", workflow.End).
		MustBuild()
	shout := team.WorkflowMember(w, "Shouts.", func(p string) (text, error) { return text{p}, nil }, func(s text) (string, error) { return s.S, nil })
	tm := team.Must(team.NewSequential("on_demand_team", []team.Member{team.AgentMember(a), nested, shout}, nil))
	out, err := tm.Run(ctx, rt, "hi", nil)
	if err != nil || out.Output != "b1!" {
		t.Fatalf("Run: %+v, %v; want b1!", out, err)
	}
	if got, err := tm.Wait(ctx, rt, out.RunID); err != nil || got.Output != "b1!" {
		t.Errorf("Wait for an ended run: %+v, %v", got, err)
	}
	if st, err := loadTeamRun(ctx, rt, out.RunID); err != nil || st.Status != agent.RunComplete {
		t.Errorf("LoadRun: %+v, %v", st, err)
	}
	var last *agent.OutputEvent
	for ev, err := range tm.RunStream(ctx, rt, "hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Output != nil {
			last = ev.Output
		}
	}
	if last == nil || last.Status != agent.OutputComplete {
		t.Errorf("RunStream's output: %+v", last)
	}
	id, err := tm.Submit(ctx, rt, "hi", &team.RunOptions{RunID: "on-demand-submitted"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tm.Wait(ctx, rt, id); err != nil || got.Output != "b3!" {
		t.Errorf("Wait: %+v, %v; want b3!", got, err)
	}
	// An ended run: pause and resume say so, cancel changes nothing.
	if err := tm.Pause(ctx, rt, out.RunID, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Pause: %v", err)
	}
	if _, err := pauseTeamRun(ctx, rt, out.RunID, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("PauseRun: %v", err)
	}
	if err := tm.Resume(ctx, rt, out.RunID); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Resume: %v", err)
	}
	if _, err := resumeTeamRun(ctx, rt, out.RunID); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("ResumeRun: %v", err)
	}
	if err := tm.Cancel(ctx, rt, out.RunID, "x"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if _, err := cancelTeamRun(ctx, rt, out.RunID, "x"); err != nil {
		t.Errorf("CancelRun: %v", err)
	}
	if _, err := tm.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
	// A team whose first call is Recover is served by it; Serve after
	// changes nothing for its runs.
	c := agent.Must(agent.NewText("on_demand_recovered_member", modeltest.NewTestModel(modeltest.Text("c")), ""))
	recovered := team.Must(team.NewSequential("on_demand_recovered", []team.Member{team.AgentMember(c)}, nil))
	if _, err := recovered.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover of a team not served yet: %v", err)
	}
	if out, err := recovered.Run(ctx, rt, "hi", nil); err != nil || out.Output != "c" {
		t.Errorf("Run after Recover: %+v, %v", out, err)
	}
}

// A nil runtime is an error matching agent.ErrNoRuntime for every
// function and method of a team that takes one, never a panic.
func TestNilRuntimeIsAnError(t *testing.T) {
	ctx := runCtx(t)
	a := agent.Must(agent.NewText("nil_runtime_member", modeltest.NewTestModel(modeltest.Text("never")), ""))
	tm := team.Must(team.NewSequential("nil_runtime_team", []team.Member{team.AgentMember(a)}, nil))
	calls := map[string]func() error{
		"Serve": func() error { return tm.Serve(ctx, nil, nil) },
		"Run": func() error {
			_, err := tm.Run(ctx, nil, "hi", nil)
			return err
		},
		"RunStream": func() error {
			var first error
			for _, err := range tm.RunStream(ctx, nil, "hi", nil) {
				first = err
				break
			}
			return first
		},
		"Submit": func() error {
			_, err := tm.Submit(ctx, nil, "hi", nil)
			return err
		},
		"Wait": func() error {
			_, err := tm.Wait(ctx, nil, "r1")
			return err
		},
		"LoadRun": func() error {
			_, err := loadTeamRun(ctx, nil, "r1")
			return err
		},
		"Pause":  func() error { return tm.Pause(ctx, nil, "r1", "x") },
		"Resume": func() error { return tm.Resume(ctx, nil, "r1") },
		"PauseRun": func() error {
			_, err := pauseTeamRun(ctx, nil, "r1", "x")
			return err
		},
		"ResumeRun": func() error {
			_, err := resumeTeamRun(ctx, nil, "r1")
			return err
		},
		"Cancel": func() error { return tm.Cancel(ctx, nil, "r1", "x") },
		"CancelRun": func() error {
			_, err := cancelTeamRun(ctx, nil, "r1", "x")
			return err
		},
		"Recover": func() error {
			_, err := tm.Recover(ctx, nil, nil)
			return err
		},
		"AgentMember.Submit": func() error {
			_, err := team.AgentMember(a).Submit(ctx, nil, "hi", nil)
			return err
		},
		"RemoteAgent.Submit": func() error {
			_, err := team.RemoteAgent("remote", "").Submit(ctx, nil, "hi", nil)
			return err
		},
		"RemoteAgent.Cancel": func() error {
			return team.RemoteAgent("remote", "").(team.Canceller).Cancel(ctx, nil, "r1", "x")
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, agent.ErrNoRuntime) {
				t.Errorf("%s with a nil runtime: %v, want agent.ErrNoRuntime", name, err)
			}
		})
	}
}
