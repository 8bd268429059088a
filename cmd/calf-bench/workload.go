package main

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// Workload W1.
const (
	agentName    = "calculator"
	instructions = "Use the add tool."
	prompt       = "add 2 and 3"
	toolName     = "add"
	toolDesc     = "Add two integers."
	toolCallID   = "call_1"
	toolArgs     = `{"a":2,"b":3}`
	answerPrefix = "The sum is "
	wantOutput   = "The sum is 5"
	modelName    = "test"
	// apiKey is sent by both systems; the mock ignores it. Setting it
	// keeps the adapter from sending $OPENAI_API_KEY to the mock.
	apiKey = "calf-bench"
)

// operands are the arguments of the add tool.
type operands struct {
	A int `json:"a"`
	B int `json:"b"`
}

// w1 answers W1's model calls: a call to add while the last message is not
// a tool result, then "The sum is " and the tool's result. Echoing the
// result makes the expected output depend on the tool having run.
func w1(_ context.Context, req *model.Request) (*model.Response, error) {
	if len(req.Messages) == 0 {
		return nil, &model.StatusError{StatusCode: 400, Message: "no messages"}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return modeltest.Text(answerPrefix + last.Text()), nil
	}
	return modeltest.ToolCalls(modeltest.Call(toolCallID, toolName, toolArgs)), nil
}

// checkOutput reports an output that is not W1's answer.
func checkOutput(got string) error {
	if got != wantOutput {
		return fmt.Errorf("%w: got %q, want %q", errWrongOutput, got, wantOutput)
	}
	return nil
}
