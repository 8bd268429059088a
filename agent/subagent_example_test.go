package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
)

// A writer agent delegates research to a researcher agent through a tool:
// the researcher runs as a child run, and its output is the tool's result.
func ExampleAgent_AddSubagent() {
	ctx := context.Background()
	// A runtime of this process, which serves on demand: the first run
	// serves the agent and every agent it may delegate to.
	rt := local.New(nil)
	defer rt.Client().Broker().Close()

	researcher := agent.Must(agent.New("researcher",
		modeltest.NewTestModel(modeltest.Text("Lyon has 520,000 inhabitants.")),
		&agent.Options{Description: "Finds facts."}))
	writer := agent.Must(agent.New("writer", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "researcher", `{"input":"How many people live in Lyon?"}`)),
		modeltest.Text("Lyon, a city of about half a million people."),
	), nil))
	if err := writer.AddSubagent(researcher, &agent.SubagentOptions{MaxTurns: 5}); err != nil {
		panic(err)
	}
	out, err := writer.Run(ctx, rt, "Write one line about Lyon.", &agent.RunOptions{RunID: "w1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	fmt.Println("tool result:", out.ToolCalls[0].Result.Text())
	child, _ := rt.LoadAgentRun(ctx, "w1/c1")
	fmt.Println("child run", child.ID, "of", child.Parent, child.Status)
	// Output:
	// Lyon, a city of about half a million people.
	// tool result: Lyon has 520,000 inhabitants.
	// child run w1/c1 of w1 complete
}
