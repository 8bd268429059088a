package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf/workflow"
)

// A nil runtime means agent.DefaultRuntime for every method of a workflow
// that takes a runtime.
func TestNilRuntimeMeansTheDefault(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	type state struct{ N int }
	w := workflow.New[state]("nil_runtime", nil).
		Node("inc", workflow.Func(func(_ context.Context, s state) (state, error) {
			s.N++
			return s, nil
		})).
		Edge(workflow.Start, "inc").Edge("inc", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := w.Run(ctx, nil, state{N: 1}, nil); err != nil || s.N != 2 {
		t.Fatalf("Run: %+v, %v", s, err)
	}
	id, err := w.Submit(ctx, nil, state{N: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := w.Wait(ctx, nil, id); err != nil || s.N != 11 {
		t.Errorf("Wait: %+v, %v", s, err)
	}
	if st, err := w.LoadRun(ctx, nil, id); err != nil || st.ID != id {
		t.Errorf("Load: %+v, %v", st, err)
	}
	cps, err := w.Checkpoints(ctx, nil, id)
	if err != nil || len(cps) == 0 {
		t.Fatalf("Checkpoints: %+v, %v", cps, err)
	}
	fork, err := w.Fork(ctx, nil, id, cps[0].Seq, nil, nil)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if _, err := w.Wait(ctx, nil, fork); err != nil {
		t.Errorf("Wait for the fork: %v", err)
	}
	var outputs int
	for ev, err := range w.RunStream(ctx, nil, state{}, nil) {
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
	// An ended run: cancel changes nothing, resume refuses.
	if err := w.Cancel(ctx, nil, id, "x"); err != nil {
		t.Errorf("Cancel: %v", err)
	}
	if err := w.Answer(ctx, nil, id, nil); err == nil {
		t.Error("Resume of an ended run: no error")
	}
	if _, err := w.Recover(ctx, nil, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
}
