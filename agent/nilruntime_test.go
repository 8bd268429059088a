package agent_test

import (
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
)

// A nil runtime means the default one for every method of an agent that
// takes a runtime; Serve on it serves the agent there once, and the runs
// given a nil runtime then use those handlers.
func TestNilRuntimeMeansTheDefault(t *testing.T) {
	m := modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two"), modeltest.Text("three"), modeltest.Text("four"))
	a := agent.Must(agent.NewText("nil_runtime", m, ""))
	ctx := runCtx(t)
	if err := a.Serve(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, nil, "hi", nil)
	if err != nil || out.Output != "one" {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	if got, err := a.Wait(ctx, nil, out.RunID); err != nil || got.Output != "one" {
		t.Errorf("Result: %+v, %v", got, err)
	}
	id, err := a.Submit(ctx, nil, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Wait(ctx, nil, id); err != nil || got.Output != "two" {
		t.Errorf("Wait: %+v, %v", got, err)
	}
	var last string
	for ev, err := range a.RunStream(ctx, nil, "hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventOutput {
			last = string(ev.Output.Content)
		}
	}
	if last != `"three"` {
		t.Errorf("RunStream's output: %s", last)
	}
	if _, err := a.Recover(ctx, nil, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
	// A second agent, served by its first run on the default runtime,
	// recovers there too.
	b := agent.Must(agent.NewText("nil_runtime_b", modeltest.NewTestModel(modeltest.Text("b")), ""))
	if _, err := b.Recover(ctx, nil, nil); err != nil {
		t.Errorf("Recover of an agent not served yet: %v", err)
	}
	if out, err := b.Run(ctx, nil, "hi", nil); err != nil || out.Output != "b" {
		t.Errorf("Run after Recover: %+v, %v", out, err)
	}
}
