package agent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
)

// The quick path: an agent run in a few lines, on the runtime of this
// process (package local: an in-process broker and an in-memory store),
// which serves the agent on its first run.
// The README's first example is this one with a real model.
func ExampleNewText() {
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

// The typed output of a run is in its stream's last event: no store read.
func ExampleAgent_DecodeOutput() {
	type city struct {
		Name    string `json:"name"`
		Country string `json:"country"`
	}
	ctx := context.Background()
	m := modeltest.NewTestModel(modeltest.Text(`{"name": "Paris", "country": "France"}`))
	a := agent.Must(agent.NewTyped[city]("cities", m, nil))
	for ev, err := range a.RunStream(ctx, local.Runtime(), "The capital of France?", nil) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Kind == agent.EventOutput {
			c, err := a.DecodeOutput(ev.Output)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s is in %s\n", c.Name, c.Country)
		}
	}
	// Output: Paris is in France
}
