package agent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
)

// Submit starts a run and returns its id at once; Wait, here or in any
// process on the same broker and store, returns its output when it ends.
func ExampleAgent_Wait() {
	ctx := context.Background()
	m := modeltest.NewTestModel(modeltest.Text("Rome."))
	a := agent.Must(agent.NewText("capitals", m, "Answer briefly."))
	id, err := a.Submit(ctx, local.Runtime(), "What is the capital of Italy?", nil)
	if err != nil {
		log.Fatal(err)
	}
	out, err := a.Wait(ctx, local.Runtime(), id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Output)
	// Output: Rome.
}
