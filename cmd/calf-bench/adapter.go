package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// systemAdapter names the measurement of model/openai alone.
const systemAdapter = "adapter"

// adapterRun does W1's two model calls through model/openai, the adapter
// Calf's agent uses, with nothing else of Calf: no broker, store, agent or
// tool call. It sends the requests the agent sends and adds the numbers
// itself, as the floor does, so that its figures against the floor's are
// the adapter's cost (with the SDK it is built on), and Calf's figures
// against its own are the rest of the framework's.
type adapterRun struct {
	m     *openai.Model
	tools []model.ToolDefinition
}

func newAdapterRun(httpClient *http.Client, base string) (*adapterRun, error) {
	m, add, err := w1ModelAndTool(httpClient, base)
	if err != nil {
		return nil, err
	}
	return &adapterRun{m: m, tools: []model.ToolDefinition{add.Definition()}}, nil
}

func (r *adapterRun) run(ctx context.Context) error {
	req := &model.Request{
		Tools:    r.tools,
		Messages: []model.Message{model.SystemMessage(instructions), model.UserMessage(prompt)},
	}
	first, err := r.m.Generate(ctx, req)
	if err != nil {
		return err
	}
	if len(first.Message.ToolCalls) != 1 || first.Message.ToolCalls[0].Name != toolName {
		return fmt.Errorf("%w: the first answer is not one call of %s", errWrongOutput, toolName)
	}
	call := first.Message.ToolCalls[0]
	var in operands
	if err := json.Unmarshal([]byte(call.Arguments), &in); err != nil {
		return fmt.Errorf("%w: tool arguments: %v", errWrongOutput, err)
	}
	req.Messages = append(req.Messages, first.Message, model.Message{
		Role: model.RoleTool, ToolCallID: call.ID, ToolName: call.Name,
		Parts: []model.Part{model.TextPart(strconv.Itoa(in.A + in.B))},
	})
	second, err := r.m.Generate(ctx, req)
	if err != nil {
		return err
	}
	return checkOutput(second.Message.Text())
}
