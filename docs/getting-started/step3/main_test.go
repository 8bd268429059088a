package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/modeltest"
)

// The desk hands off to the travel agent, which asks its subagent and
// answers: the caller gets the travel agent's answer.
func TestHandoffAndSubagent(t *testing.T) {
	m := modeltest.NewTestModel(
		// desk
		modeltest.ToolCalls(modeltest.Call("c1", "transfer_to_travel", `{"context":"Wants to say thank you in Italian."}`)),
		// travel
		modeltest.ToolCalls(modeltest.Call("c2", "translator", `{"input":"thank you, in Italian"}`)),
		// translator, the subagent
		modeltest.Text("Grazie"),
		// travel again, with the subagent's answer
		modeltest.Text("Say grazie."),
	)
	var out strings.Builder
	if err := run(t.Context(), m, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "desk handed off\n[travel] Say grazie.\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	reqs := m.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	if got := reqs[2].Messages[len(reqs[2].Messages)-1].Text(); got != "thank you, in Italian" {
		t.Errorf("the subagent was asked %q", got)
	}
}
