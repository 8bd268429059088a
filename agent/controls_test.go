package agent_test

import (
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// An agent's own Pause, Resume and Cancel control its runs by id, as the
// runtime's do by RunRef; a cancelled run's error is a *RunError that
// names the agent kind, the agent and the run; a RunRef of another kind
// is refused by the runtime's controls of agent runs, and records nothing.
func TestAgentControls(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.New("ctl", modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two")), nil)))
	ctx := runCtx(t)

	// Paused before its input is handled, the run starts paused, and goes
	// on when resumed.
	if err := a.Pause(ctx, e.rt, "c1", "hold"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(ctx, e.rt, "go", &agent.RunOptions{RunID: "c1"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if info, err := e.rt.LoadAgentRun(ctx, "c1"); err != nil || !info.Paused || info.Status != agent.RunRunning {
		t.Fatalf("paused run: %+v, %v", info, err)
	}
	if err := a.Resume(ctx, e.rt, "c1"); err != nil {
		t.Fatal(err)
	}
	out, err := a.Wait(ctx, e.rt, "c1")
	if err != nil || out.Output != "one" {
		t.Fatalf("resumed run: %+v, %v", out, err)
	}
	if err := a.Pause(ctx, e.rt, "c1", "too late"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("pause of an ended run: %v", err)
	}

	// Cancelled while paused, the run ends with a *RunError of kind agent.
	if err := a.Pause(ctx, e.rt, "c2", "hold"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(ctx, e.rt, "go", &agent.RunOptions{RunID: "c2"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if err := a.Cancel(ctx, e.rt, "c2", "changed my mind"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Wait(ctx, e.rt, "c2")
	var re *agent.RunError
	if !errors.As(err, &re) || !errors.Is(err, agent.ErrRunCancelled) || errors.Is(err, agent.ErrRunFailed) {
		t.Fatalf("cancelled run: %v", err)
	}
	want := agent.RunRef{Kind: "agent", Name: "ctl", RunID: "c2"}
	if re.RunRef != want || re.Status != agent.RunCancelled || re.Reason != "changed my mind" {
		t.Errorf("RunError = %+v, want %+v cancelled for the reason given", re, want)
	}
	if got := err.Error(); got != "agent ctl: run c2 cancelled: changed my mind" {
		t.Errorf("error text = %q", got)
	}

	// The runtime's controls take runs of agents only.
	for name, err := range map[string]error{
		"cancel": func() error {
			_, err := e.rt.Cancel(ctx, agent.RunRef{Kind: "team", Name: "ctl", RunID: "c3"}, "x")
			return err
		}(),
		"pause": func() error {
			_, err := e.rt.Pause(ctx, agent.RunRef{Kind: "workflow", Name: "ctl", RunID: "c3"}, "x")
			return err
		}(),
		"no run id": func() error {
			_, err := e.rt.Resume(ctx, agent.RunRef{Name: "ctl"})
			return err
		}(),
		"submit": e.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Kind: "team", Name: "ctl", RunID: "c3"}, Input: &agent.InputEvent{Content: "x"}}),
	} {
		if err == nil {
			t.Errorf("%s of a run that is not an agent's: no error", name)
		}
	}
	if _, err := e.rt.Store().Get(ctx, store.KindRun, "c3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused control recorded run c3: %v", err)
	}
}
