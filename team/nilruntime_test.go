package team_test

import (
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
)

// A nil runtime means agent.DefaultRuntime for every function and method
// of a team that takes a runtime.
func TestNilRuntimeMeansTheDefault(t *testing.T) {
	ctx := runCtx(t)
	a := agent.Must(agent.NewText("nil_runtime_member", modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two"), modeltest.Text("three")), ""))
	if err := a.Serve(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	tm := team.Must(team.NewSequential("nil_runtime_team", []team.Member{team.AgentMember(a)}, nil))
	if err := tm.Serve(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	out, err := tm.Run(ctx, nil, "hi", nil)
	if err != nil || out.Output != "one" {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	if got, err := tm.Wait(ctx, nil, out.RunID); err != nil || got.Output != "one" {
		t.Errorf("Result: %+v, %v", got, err)
	}
	if st, err := team.LoadRun(ctx, nil, out.RunID); err != nil || st.Status != agent.RunComplete {
		t.Errorf("LoadState: %+v, %v", st, err)
	}
	var last *agent.OutputEvent
	for ev, err := range tm.RunStream(ctx, nil, "hi", nil) {
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
	if _, err := tm.Submit(ctx, nil, "hi", &team.RunOptions{RunID: "nil-runtime-submitted"}); err != nil {
		t.Errorf("Submit: %v", err)
	}
	// An ended run: pause and resume say so, cancel changes nothing.
	if err := tm.Pause(ctx, nil, out.RunID, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Pause: %v", err)
	}
	if _, err := team.PauseRun(ctx, nil, out.RunID, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("PauseRun: %v", err)
	}
	if err := tm.Resume(ctx, nil, out.RunID); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Resume: %v", err)
	}
	if _, err := team.ResumeRun(ctx, nil, out.RunID); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("ResumeRun: %v", err)
	}
	if err := tm.Cancel(ctx, nil, out.RunID, "x"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if err := team.CancelRun(ctx, nil, out.RunID, "x"); err != nil {
		t.Errorf("CancelRun: %v", err)
	}
	if _, err := tm.Recover(ctx, nil, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
}
