package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

func TestCalculator(t *testing.T) {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "multiply", `{"a":5,"b":7}`)),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("(2 + 3) * 7 = " + req.Messages[len(req.Messages)-1].Text()), nil
		},
	)
	var log strings.Builder
	answer, err := run(t.Context(), m, "What is (2 + 3) * 7?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if answer != "(2 + 3) * 7 = 35" {
		t.Errorf("answer = %q", answer)
	}
	want := "-> add({\"a\":2,\"b\":3})\n<- 5\n-> multiply({\"a\":5,\"b\":7})\n<- 35\n"
	if log.String() != want {
		t.Errorf("log = %q, want %q", log.String(), want)
	}
}
