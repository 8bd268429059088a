package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/workflow"
)

// On the process's local runtime a workflow needs no Serve: its first run
// serves it, and its agent and sub-workflow nodes serve theirs. The
// methods that read and control its runs find them there.
func TestLocalRuntimeServesOnDemand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rt := local.Runtime()
	type state struct {
		N    int
		Text string
	}
	inc := workflow.New[state]("on_demand_inc", nil).
		Node("inc", workflow.Func(func(_ context.Context, s state) (state, error) {
			s.N++
			return s, nil
		})).
		Edge(workflow.Start, "inc").Edge("inc", workflow.End).
		MustBuild()
	a := agent.Must(agent.NewText("on_demand_node", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) { return modeltest.Text("said"), nil }), ""))
	w := workflow.New[state]("on_demand", nil).
		Node("sub", workflow.SubWorkflow(inc, func(s state) (state, error) { return s, nil }, func(_ state, final state) (state, error) { return final, nil })).
		Node("say", workflow.AgentNode(a, func(state) (string, error) { return "say", nil }, func(s state, out string) (state, error) {
			s.Text = out
			return s, nil
		})).
		Edge(workflow.Start, "sub").Edge("sub", "say").Edge("say", workflow.End).
		MustBuild()
	if s, err := w.Run(ctx, rt, state{N: 1}, nil); err != nil || s.N != 2 || s.Text != "said" {
		t.Fatalf("Run: %+v, %v", s, err)
	}
	id, err := w.Submit(ctx, rt, state{N: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := w.Wait(ctx, rt, id); err != nil || s.N != 11 {
		t.Errorf("Wait: %+v, %v", s, err)
	}
	if st, err := w.LoadRun(ctx, rt, id); err != nil || st.ID != id {
		t.Errorf("LoadRun: %+v, %v", st, err)
	}
	cps, err := w.Checkpoints(ctx, rt, id)
	if err != nil || len(cps) == 0 {
		t.Fatalf("Checkpoints: %+v, %v", cps, err)
	}
	fork, err := w.Fork(ctx, rt, id, cps[0].Seq, nil, nil)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if s, err := w.Wait(ctx, rt, fork); err != nil || s.N != 11 {
		t.Errorf("Wait for the fork: %+v, %v", s, err)
	}
	var outputs int
	for ev, err := range w.RunStream(ctx, rt, state{}, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == workflow.EventOutput {
			outputs++
		}
	}
	if outputs != 1 {
		t.Errorf("RunStream yielded %d outputs", outputs)
	}
	// An ended run: cancel changes nothing, answer refuses.
	if err := w.Cancel(ctx, rt, id, "x"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if err := w.Answer(ctx, rt, id, nil); err == nil {
		t.Error("Answer to an ended run: no error")
	}
	if _, err := w.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
	// A workflow whose first call is Recover is served by it.
	if _, err := inc.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover of a workflow served by a node: %v", err)
	}
	other := workflow.New[state]("on_demand_recovered", nil).
		Node("inc", workflow.Func(func(_ context.Context, s state) (state, error) {
			s.N++
			return s, nil
		})).
		Edge(workflow.Start, "inc").Edge("inc", workflow.End).
		MustBuild()
	if _, err := other.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover of a workflow not served yet: %v", err)
	}
	if s, err := other.Run(ctx, rt, state{N: 5}, nil); err != nil || s.N != 6 {
		t.Errorf("Run after Recover: %+v, %v", s, err)
	}
}

// A nil runtime is an error matching agent.ErrNoRuntime for every method
// of a workflow that takes one, never a panic.
func TestNilRuntimeIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	type state struct{ N int }
	w := workflow.New[state]("nil_runtime", nil).
		Node("inc", workflow.Func(func(_ context.Context, s state) (state, error) { return s, nil })).
		Edge(workflow.Start, "inc").Edge("inc", workflow.End).
		MustBuild()
	calls := map[string]func() error{
		"Serve": func() error { return w.Serve(ctx, nil, nil) },
		"Run": func() error {
			_, err := w.Run(ctx, nil, state{}, nil)
			return err
		},
		"RunStream": func() error {
			var first error
			for _, err := range w.RunStream(ctx, nil, state{}, nil) {
				first = err
				break
			}
			return first
		},
		"Submit": func() error {
			_, err := w.Submit(ctx, nil, state{}, nil)
			return err
		},
		"Wait": func() error {
			_, err := w.Wait(ctx, nil, "r1")
			return err
		},
		"LoadRun": func() error {
			_, err := w.LoadRun(ctx, nil, "r1")
			return err
		},
		"Pause":  func() error { return w.Pause(ctx, nil, "r1", "why") },
		"Resume": func() error { return w.Resume(ctx, nil, "r1") },
		"PauseRun": func() error {
			_, err := pauseWorkflowRun(ctx, nil, "w", "r1", "why")
			return err
		},
		"ResumeRun": func() error {
			_, err := resumeWorkflowRun(ctx, nil, "w", "r1")
			return err
		},
		"CancelRun": func() error {
			_, err := cancelWorkflowRun(ctx, nil, "w", "r1", "why")
			return err
		},
		"Checkpoints": func() error {
			_, err := w.Checkpoints(ctx, nil, "r1")
			return err
		},
		"Fork": func() error {
			_, err := w.Fork(ctx, nil, "r1", 0, nil, nil)
			return err
		},
		"Cancel": func() error { return w.Cancel(ctx, nil, "r1", "x") },
		"Answer": func() error { return w.Answer(ctx, nil, "r1", nil) },
		"Recover": func() error {
			_, err := w.Recover(ctx, nil, nil)
			return err
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
