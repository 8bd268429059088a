package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/modeltest"
)

// The researcher's facts are the writer's input, and the writer's
// paragraph is the team's answer.
func TestTeam(t *testing.T) {
	facts := "Dances tell where food is.\nThe angle gives the direction.\nThe length gives the distance."
	m := modeltest.NewTestModel(
		modeltest.Text(facts),
		modeltest.Text("Bees dance to tell each other where the flowers are."),
	)
	var out strings.Builder
	if err := run(t.Context(), m, &out); err != nil {
		t.Fatal(err)
	}
	want := "step 1: researcher\nstep 2: writer\nBees dance to tell each other where the flowers are.\n"
	if got := out.String(); got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}
	reqs := m.Requests()
	if got := reqs[1].Messages[len(reqs[1].Messages)-1].Text(); got != facts {
		t.Errorf("the writer was given %q, want the researcher's facts", got)
	}
}
