package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/modeltest"
)

// The model calls the tool, gets its result, and answers with it; the
// stream shows the call, the result and the answer in that order.
func TestTypedTool(t *testing.T) {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "convert", `{"amount":100,"from":"USD","to":"GBP"}`)),
		modeltest.Text("100 USD is 75.00 GBP."),
	)
	var out strings.Builder
	if err := run(t.Context(), m, &out); err != nil {
		t.Fatal(err)
	}
	want := "-> convert {\"amount\":100,\"from\":\"USD\",\"to\":\"GBP\"}\n<- 75.00 GBP\n100 USD is 75.00 GBP.\n"
	if got := out.String(); got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}
	// The tool's schema, from convertArgs, went to the model.
	tools := m.Requests()[0].Tools
	if len(tools) != 1 || !strings.Contains(string(tools[0].Parameters), `"enum":["EUR","USD","GBP"]`) {
		t.Errorf("the model was given the tools %+v", tools)
	}
}
