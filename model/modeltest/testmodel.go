package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/calf-go/calf/model"
)

// ErrScriptExhausted is returned by a [TestModel] called more times than it
// has steps.
var ErrScriptExhausted = errors.New("modeltest: script exhausted")

// Step is one scripted answer of a [TestModel]. It is one of:
//
//   - a *[model.Response], which the call returns (a copy of it);
//   - an error, which the call returns;
//   - a func(context.Context, *model.Request) (*model.Response, error) or a
//     [FunctionModel], which the call runs and whose results it returns.
type Step = any

// TestModel is a scripted [model.Model] for tests: each call answers with
// the next of its steps and records the request it was given. It also
// streams (see [TestModel.GenerateStream]). A TestModel is safe for
// concurrent use; concurrent calls take steps in the order they acquire
// the model.
type TestModel struct {
	mu       sync.Mutex
	steps    []Step
	requests []*model.Request
}

var (
	_ model.Model    = (*TestModel)(nil)
	_ model.Streamer = (*TestModel)(nil)
)

// NewTestModel returns a model that answers its calls with steps, in order.
// A call beyond the last step fails with an error that matches
// [ErrScriptExhausted]. It panics if a step is not one of the kinds [Step]
// lists, since that is a mistake in the test.
func NewTestModel(steps ...Step) *TestModel {
	for i, s := range steps {
		switch s := s.(type) {
		case *model.Response:
			if s == nil {
				panic(fmt.Sprintf("modeltest: step %d is a nil *model.Response", i))
			}
		case error, FunctionModel, func(context.Context, *model.Request) (*model.Response, error):
		default:
			panic(fmt.Sprintf("modeltest: step %d has unsupported type %T", i, s))
		}
	}
	return &TestModel{steps: steps}
}

// Name returns "test".
func (m *TestModel) Name() string { return "test" }

// Generate records req and answers with the next step. A call whose ctx
// is already done returns ctx's error and neither takes a step nor counts
// as a call.
func (m *TestModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, cloneRequest(req))
	var step Step
	if n < len(m.steps) {
		step = m.steps[n]
	}
	m.mu.Unlock()

	switch s := step.(type) {
	case nil:
		return nil, fmt.Errorf("%w after %d calls", ErrScriptExhausted, len(m.steps))
	case *model.Response:
		return cloneResponse(s), nil
	case error:
		return nil, s
	case FunctionModel:
		return s(ctx, req)
	case func(context.Context, *model.Request) (*model.Response, error):
		return s(ctx, req)
	}
	panic("unreachable")
}

// GenerateStream takes the next step as [TestModel.Generate] does and
// streams its response: the text as one delta per word (with the white
// space before it), then each tool call as a delta with its index, id and
// name followed by its arguments in two pieces, then the response itself.
// It stops with ctx's error if ctx is done between chunks.
func (m *TestModel) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		resp, err := m.Generate(ctx, req)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		for _, d := range streamDeltas(resp) {
			if err := ctx.Err(); err != nil {
				yield(model.Chunk{}, err)
				return
			}
			if !yield(model.Chunk{Delta: d}, nil) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(model.Chunk{}, err)
			return
		}
		yield(model.Chunk{Response: resp}, nil)
	}
}

// streamDeltas returns the deltas a streamed resp arrives in.
func streamDeltas(resp *model.Response) []*model.Delta {
	var ds []*model.Delta
	for _, w := range splitWords(resp.Message.Text()) {
		ds = append(ds, &model.Delta{Text: w})
	}
	for i, c := range resp.Message.ToolCalls {
		ds = append(ds, &model.Delta{ToolCall: &model.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name}})
		for _, a := range splitHalves(c.Arguments) {
			ds = append(ds, &model.Delta{ToolCall: &model.ToolCallDelta{Index: i, Arguments: a}})
		}
	}
	return ds
}

// Calls returns the number of calls made so far, including calls beyond
// the script.
func (m *TestModel) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// Requests returns copies of the requests of all calls so far, in order.
func (m *TestModel) Requests() []*model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*model.Request, len(m.requests))
	for i, r := range m.requests {
		out[i] = cloneRequest(r)
	}
	return out
}

// FunctionModel is a [model.Model] whose responses come from a function.
type FunctionModel func(ctx context.Context, req *model.Request) (*model.Response, error)

var _ model.Model = FunctionModel(nil)

// Name returns "function".
func (f FunctionModel) Name() string { return "function" }

// Generate returns f(ctx, req).
func (f FunctionModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	return f(ctx, req)
}

// Scripted usage: every helper response claims scriptedInputTokens input
// tokens, one output token per word of text and toolCallTokens per call.
const (
	scriptedInputTokens = 10
	toolCallTokens      = 5
)

func scriptedUsage(outputTokens int64) model.Usage {
	return model.Usage{
		Requests:     1,
		InputTokens:  scriptedInputTokens,
		OutputTokens: outputTokens,
		TotalTokens:  scriptedInputTokens + outputTokens,
	}
}

// Text returns a response with the assistant text s. Its usage is one
// request, 10 input tokens and one output token per word of s.
func Text(s string) *model.Response {
	return &model.Response{
		Message:      model.AssistantMessage(s),
		FinishReason: model.FinishStop,
		Usage:        scriptedUsage(int64(len(splitWords(s)))),
	}
}

// ToolCalls returns a response that calls tools. Its usage is one request,
// 10 input tokens and 5 output tokens per call.
func ToolCalls(calls ...model.ToolCall) *model.Response {
	return &model.Response{
		Message:      model.Message{Role: model.RoleAssistant, ToolCalls: calls},
		FinishReason: model.FinishToolCalls,
		Usage:        scriptedUsage(int64(toolCallTokens * len(calls))),
	}
}

// Call returns a tool call with the given id, tool name and JSON arguments.
func Call(id, name, argsJSON string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Arguments: argsJSON}
}

// JSON returns a text response whose text is v encoded as JSON, as a model
// answers a request for structured output. It panics if v does not encode.
func JSON(v any) *model.Response {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("modeltest: JSON: %v", err))
	}
	return Text(string(b))
}
