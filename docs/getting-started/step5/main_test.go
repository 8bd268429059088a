package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/modeltest"
)

// The classifier's label routes the ticket to the refund node, a function:
// the helper agent is not called.
func TestWorkflow(t *testing.T) {
	m := modeltest.NewTestModel(modeltest.JSON(map[string]string{"category": "refund"}))
	var out strings.Builder
	if err := run(t.Context(), m, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "refund: Your refund is on its way.\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if m.Calls() != 1 {
		t.Errorf("%d model calls, want 1 (the classifier's)", m.Calls())
	}
	// The classifier was given its output's schema, with the categories.
	req := m.Requests()[0]
	if req.Output == nil || !strings.Contains(string(req.Output.Schema), `"enum":["refund","question"]`) {
		t.Errorf("the classifier's request asked for the output %+v", req.Output)
	}
}
