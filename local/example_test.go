package local_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
)

// An agent run on the process's runtime: its first run serves it there.
func ExampleRuntime() {
	ctx := context.Background()
	m := modeltest.NewTestModel(modeltest.Text("Paris."))
	a := agent.Must(agent.NewText("geographer", m, "Answer briefly."))
	out, err := a.Run(ctx, local.Runtime(), "What is the capital of France?", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output)
	// Output: Paris.
}

// A runtime of its own, here for a team: the team's run serves the team,
// and the team's runs of its members serve them.
func ExampleNew() {
	ctx := context.Background()
	rt := local.New(nil)
	defer rt.Client().Broker().Close()

	writer := agent.Must(agent.NewText("writer", modeltest.NewTestModel(modeltest.Text("A draft.")), "Write."))
	editor := agent.Must(agent.NewText("editor", modeltest.NewTestModel(modeltest.Text("An edited draft.")), "Edit."))
	press := team.Must(team.NewSequential("press", []team.Member{team.AgentMember(writer), team.AgentMember(editor)}, nil))
	out, err := press.Run(ctx, rt, "Write about Calf.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output)
	// Output: An edited draft.
}
