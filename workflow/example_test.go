package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/workflow"
)

// A loop: count up until the state says stop.
func Example() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type state struct{ N int }
	inc := workflow.Func(func(_ context.Context, s state) (state, error) {
		s.N++
		return s, nil
	})
	w, err := workflow.New[state]("count", nil).
		Node("inc", inc).
		Edge(workflow.Start, "inc").
		Route("inc", func(s state) string {
			if s.N < 3 {
				return "inc"
			}
			return workflow.End
		}, "inc", workflow.End).
		Build()
	if err != nil {
		panic(err)
	}
	if err := w.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := w.Run(ctx, rt, state{}, &workflow.RunOptions{RunID: "run-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println("n =", out.N)
	cps, _ := w.Checkpoints(ctx, rt, "run-1")
	for _, cp := range cps {
		fmt.Printf("checkpoint %d: after %q, n = %d, next %s\n", cp.Seq, cp.Node, cp.State.N, cp.Next.Node)
	}
	// Output:
	// n = 3
	// checkpoint 0: after "", n = 0, next inc
	// checkpoint 1: after "inc", n = 1, next inc
	// checkpoint 2: after "inc", n = 2, next inc
	// checkpoint 3: after "inc", n = 3, next end
}

// An agent as a node: its run is a child run, and its output comes back
// to the workflow as an event.
func ExampleAgentNode() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	m := modeltest.NewTestModel(modeltest.Text("Bonjour"))
	translator := agent.Must(agent.New("translator", m, nil))
	if err := translator.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	type state struct{ English, French string }
	w := workflow.New[state]("translate", nil).
		Node("translate", workflow.AgentNode(translator,
			func(s state) (string, error) { return "Translate to French: " + s.English, nil },
			func(s state, out string) (state, error) { s.French = out; return s, nil })).
		Edge(workflow.Start, "translate").
		Edge("translate", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := w.Run(ctx, rt, state{English: "Hello"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.French)
	// Output: Bonjour
}

// A node that waits for a person: the run is suspended, costing only its
// stored state, until Resume sends the answer.
func ExampleInterrupt() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type state struct{ Plan, Verdict string }
	approve := workflow.Func(func(ctx context.Context, s state) (state, error) {
		var answer string
		ok, err := workflow.ResumeInput(ctx, &answer)
		if err != nil {
			return s, err
		}
		if !ok {
			return s, workflow.Interrupt("approve " + s.Plan + "?")
		}
		s.Verdict = strings.ToUpper(answer)
		return s, nil
	})
	w := workflow.New[state]("approval", nil).
		Node("approve", approve).
		Edge(workflow.Start, "approve").
		Edge("approve", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	_, err := w.Run(ctx, rt, state{Plan: "the launch"}, nil)
	var ie *workflow.InterruptError
	if !errors.As(err, &ie) {
		panic(err)
	}
	fmt.Println("waiting:", ie.Reason)
	if err := w.Answer(ctx, rt, ie.RunID, "yes"); err != nil {
		panic(err)
	}
	out, err := w.Wait(ctx, rt, ie.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println("verdict:", out.Verdict)
	// Output:
	// waiting: approve the launch?
	// verdict: YES
}

// Time travel: a new run from a checkpoint of an old one, with a changed
// state.
func ExampleWorkflow_Fork() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type state struct{ Steps []string }
	step := func(name string) workflow.Node[state] {
		return workflow.Func(func(_ context.Context, s state) (state, error) {
			s.Steps = append(s.Steps, name)
			return s, nil
		})
	}
	w := workflow.New[state]("abc", nil).
		Node("a", step("a")).Node("b", step("b")).Node("c", step("c")).
		Edge(workflow.Start, "a").Edge("a", "b").Edge("b", "c").Edge("c", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	if _, err := w.Run(ctx, rt, state{}, &workflow.RunOptions{RunID: "first"}); err != nil {
		panic(err)
	}
	// Go back to checkpoint 1 (after a) and change the past.
	changed := state{Steps: []string{"A"}}
	id, err := w.Fork(ctx, rt, "first", 1, &changed, nil)
	if err != nil {
		panic(err)
	}
	out, err := w.Wait(ctx, rt, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Steps)
	// Output: [A b c]
}

// A run paused between two steps and resumed: here the first node asks
// for the pause of its own run (a caller may ask from any process); the
// node finishes, and the next waits for Resume.
func ExampleWorkflow_Pause() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type state struct{ Text string }
	var w *workflow.Workflow[state]
	w = workflow.New[state]("pausing", nil).
		Node("draft", workflow.Func(func(ctx context.Context, s state) (state, error) {
			info, _ := workflow.Info(ctx)
			if err := w.Pause(ctx, rt, info.RunID, "review the draft"); err != nil {
				return s, err
			}
			s.Text = "draft"
			return s, nil
		})).
		Node("publish", workflow.Func(func(_ context.Context, s state) (state, error) {
			s.Text += ", published"
			return s, nil
		})).
		Edge(workflow.Start, "draft").
		Edge("draft", "publish").
		Edge("publish", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	for ev, err := range w.RunStream(ctx, rt, state{}, &workflow.RunOptions{RunID: "run-1"}) {
		if err != nil {
			panic(err)
		}
		switch {
		case ev.Kind == workflow.EventPause && ev.Pause.Paused:
			info, err := w.LoadRun(ctx, rt, ev.RunID)
			if err != nil {
				panic(err)
			}
			fmt.Printf("paused before %q: %s\n", info.Node, info.Pause.Reason)
			if err := w.Resume(ctx, rt, ev.RunID); err != nil {
				panic(err)
			}
		case ev.Kind == workflow.EventOutput:
			out, err := w.DecodeOutput(ev.Output)
			if err != nil {
				panic(err)
			}
			fmt.Println(out.Text)
		}
	}
	// Output:
	// paused before "publish": review the draft
	// draft, published
}
