package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// A triage agent hands the conversation to a billing agent, which
// answers: the caller of the triage run gets the billing agent's output.
func ExampleHandoff() {
	ctx := context.Background()
	// A runtime of this process, which serves on demand: the first run
	// serves the agent and every agent it may delegate to.
	rt := local.New(nil)
	defer rt.Client().Broker().Close()

	billing := agent.Must(agent.New("billing",
		modeltest.NewTestModel(modeltest.Text("Your invoice was resent.")),
		&agent.Options{Description: "Invoices and payments."}))
	// The tool is named transfer_to_billing; the billing agent sees the
	// conversation without triage's tool calls, plus the context.
	transfer := tool.Must(agent.Handoff(billing, &agent.HandoffOptions{TextOnly: true}))
	triage := agent.Must(agent.New("triage",
		modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("c1", "transfer_to_billing", `{"context":"Needs invoice 12 again."}`))),
		&agent.Options{Tools: []tool.Tool{transfer}}))
	out, err := triage.Run(ctx, rt, "I never got my invoice", &agent.RunOptions{RunID: "r1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	fmt.Println("answered by run", out.RunID)
	st, _ := rt.LoadState(ctx, "r1")
	fmt.Println("r1:", st.Status, "to", st.HandedOffTo.Agent)
	// Output:
	// Your invoice was resent.
	// answered by run r1.handoff.1
	// r1: handed_off to billing
}
