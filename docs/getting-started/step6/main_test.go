package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/modeltest"
)

// The refund waits for the answer read from the input; approved, it runs,
// and the model answers with its result.
func TestApproval(t *testing.T) {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "refund", `{"order":"A-17","amount":30}`)),
		modeltest.Text("Order A-17 was refunded 30 euros."),
	)
	var out strings.Builder
	if err := run(t.Context(), m, strings.NewReader("y\n"), &out); err != nil {
		t.Fatal(err)
	}
	want := "refund {\"order\":\"A-17\",\"amount\":30}? [y/N] <- refunded 30.00 EUR on order A-17\nOrder A-17 was refunded 30 euros.\n"
	if got := out.String(); got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}
}
