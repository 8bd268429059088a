package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// streamRuns is how many runs each broker streams: enough to catch a tool
// call that overtakes the deltas of its step, which travel under another
// key.
const streamRuns = 25

// TestRunStreamYieldsDeltasBeforeWhatFollows streams runs whose model says
// some words and then calls a tool, and checks on every broker that each
// step's deltas come after its inference and before its tool call, its
// result and the output, every time.
func TestRunStreamYieldsDeltasBeforeWhatFollows(t *testing.T) {
	brokers := []struct {
		name string
		open func(t *testing.T) calf.Broker
	}{
		{"memory", func(*testing.T) calf.Broker { return memory.New(nil) }},
		{"nats", func(t *testing.T) calf.Broker {
			b, err := embedded.Open(t.Context(), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	}
	for _, bt := range brokers {
		t.Run(bt.name, func(t *testing.T) {
			b := bt.open(t)
			t.Cleanup(func() { _ = b.Close() })
			c := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = c.Close() })
			rt := agent.NewRuntime(c, storemem.New(), nil)
			var steps []modeltest.Step
			for range streamRuns {
				first := modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`))
				first.Message.Parts = []model.Part{model.TextPart("Let me add these two numbers with the tool.")}
				steps = append(steps, first, modeltest.Text("The sum of the two numbers is 5."))
			}
			add, _ := addTool(t)
			a, err := agent.New("talker", modeltest.NewTestModel(steps...), &agent.Options{Tools: []tool.Tool{add}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Serve(t.Context(), rt, nil); err != nil {
				t.Fatal(err)
			}
			for i := range streamRuns {
				var kinds []string
				for ev, err := range a.RunStream(runCtx(t), rt, "add 2 and 3", nil) {
					if err != nil {
						t.Fatalf("run %d: %v", i, err)
					}
					kinds = append(kinds, fmt.Sprintf("%s%d", ev.Kind, ev.Step))
				}
				checkStreamOrder(t, i, kinds)
			}
		})
	}
}

// checkStreamOrder checks a stream of "{kind}{step}" against the causal
// order of a two-step run: input, then for each step its inference, its
// deltas, and what followed from them.
func checkStreamOrder(t *testing.T, run int, kinds []string) {
	t.Helper()
	got := strings.Join(kinds, " ")
	// Step 1: "Let me add these two numbers with the tool." is nine words,
	// then the call's name delta and its arguments in two pieces.
	want := "input0 inference1 " + strings.Repeat("delta1 ", 12) + "tool_call1 tool_result1 inference2 " +
		strings.Repeat("delta2 ", 8) + "output2"
	if got != want {
		t.Errorf("run %d: events\n got %s\nwant %s", run, got, want)
	}
}
