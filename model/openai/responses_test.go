package openai_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// No recording covers the Responses API: these tests run against the fake
// of responsesfake_test.go, shaped after OpenAI's documented objects and
// events.

// newResponses returns a Responses model that talks to f without retries
// unless opts asks for them.
func newResponses(t *testing.T, f *respFake, opts openai.Options) *openai.ResponsesModel {
	t.Helper()
	if opts.Model == "" {
		opts.Model = "o4-mini"
	}
	if opts.APIKey == "" {
		opts.APIKey = "sk-test"
	}
	opts.BaseURL = f.URL()
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	m, err := openai.NewResponses(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// asJSON returns v as it would come back from a JSON document.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResponsesName(t *testing.T) {
	f := newRespFake(t)
	if got := newResponses(t, f, openai.Options{Model: "gpt-5"}).Name(); got != "openai-responses:gpt-5" {
		t.Errorf("Name() = %q", got)
	}
}

// TestResponsesRequest checks the body of a request that uses every part
// of the neutral request.
func TestResponsesRequest(t *testing.T) {
	temp, parallel := 0.2, false
	png := []byte("\x89PNG\r\n\x1a\n fake image")
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)
	req := &model.Request{
		Messages: []model.Message{
			model.SystemMessage("Be brief."),
			model.SystemMessage("Use the tools."),
			{Role: model.RoleUser, Parts: []model.Part{model.TextPart("Add 2 and 3, and look:"), model.ImagePart("image/png", png), model.ImageURLPart("https://example.com/a.jpg")}},
			{Role: model.RoleAssistant,
				Parts: []model.Part{
					{Type: model.PartThinking, Text: "The user wants a sum.", ID: "rs_1", Opaque: "enc-1", Provider: "openai"},
					{Type: model.PartThinking, Text: "Call add.", ID: "rs_1", Provider: "openai"},
					{Type: model.PartThinking, Text: "Anthropic's thoughts", Signature: "sig", Provider: "anthropic"},
					model.TextPart("Adding."),
				},
				ToolCalls: []model.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":2,"b":3}`}, {ID: "call_2", Name: "shot", Arguments: `{}`}}},
			{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("5")}},
			{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "shot", Parts: []model.Part{model.ImagePart("image/png", png)}},
			model.UserMessage("Thanks."),
		},
		Tools:             []model.ToolDefinition{{Name: "add", Description: "Adds two numbers.", Parameters: schema}, {Name: "shot"}},
		ToolChoice:        "add",
		ParallelToolCalls: &parallel,
		Output:            &model.OutputSchema{Name: "sum", Schema: schema, Strict: true},
		Temperature:       &temp,
		MaxTokens:         300,
	}
	dataURL := "data:image/png;base64,iVBORw0KGgogZmFrZSBpbWFnZQ=="
	want := map[string]any{
		"model":        "o4-mini",
		"instructions": "Be brief.\n\nUse the tools.",
		"input": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "Add 2 and 3, and look:"},
				map[string]any{"type": "input_image", "image_url": dataURL},
				map[string]any{"type": "input_image", "image_url": "https://example.com/a.jpg"},
			}},
			map[string]any{"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-1", "summary": []any{
				map[string]any{"type": "summary_text", "text": "The user wants a sum."},
				map[string]any{"type": "summary_text", "text": "Call add."},
			}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Adding."}}},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "add", "arguments": `{"a":2,"b":3}`},
			map[string]any{"type": "function_call", "call_id": "call_2", "name": "shot", "arguments": `{}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "5"},
			map[string]any{"type": "function_call_output", "call_id": "call_2", "output": "The result is the image in the next message."},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "Images returned by tool call call_2:"},
				map[string]any{"type": "input_image", "image_url": dataURL},
			}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Thanks."}}},
		},
		"tools": []any{
			map[string]any{"type": "function", "name": "add", "description": "Adds two numbers.", "parameters": asJSON(t, schema), "strict": false},
			map[string]any{"type": "function", "name": "shot", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}, "strict": false},
		},
		"tool_choice":         map[string]any{"type": "function", "name": "add"},
		"parallel_tool_calls": false,
		"text":                map[string]any{"format": map[string]any{"type": "json_schema", "name": "sum", "schema": asJSON(t, schema), "strict": true}},
		"temperature":         0.2,
		"max_output_tokens":   300.0,
		"store":               false,
		"include":             []any{"reasoning.encrypted_content"},
	}
	f := newRespFake(t, responseObject("resp_1", "o4-mini", usageOf(10, 0, 2, 0), messageItem("msg_1", "5")))
	if _, err := newResponses(t, f, openai.Options{}).Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(asJSON(t, want), f.body(0)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if got := f.headers[0].Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization %q", got)
	}
	if f.paths[0] != "/v1/responses" {
		t.Errorf("path %q", f.paths[0])
	}
}

func TestResponsesOptions(t *testing.T) {
	f := newRespFake(t, responseObject("resp_1", "o3", usageOf(1, 0, 1, 0), messageItem("msg_1", "ok")))
	m := newResponses(t, f, openai.Options{Model: "o3", Store: true, ReasoningEffort: "high", ReasoningSummary: "auto"})
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}, ToolChoice: model.ToolChoiceRequired}); err != nil {
		t.Fatal(err)
	}
	got := f.body(0)
	want := map[string]any{
		"model":       "o3",
		"input":       []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi"}}}},
		"store":       true,
		"reasoning":   map[string]any{"effort": "high", "summary": "auto"},
		"tool_choice": "required",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// fullTurn is a response with reasoning (a summary in two parts), text and
// two function calls.
func fullTurn() map[string]any {
	return responseObject("resp_full", "o4-mini-2025-04-16", usageOf(120, 64, 80, 48),
		reasoningItem("rs_abc", "gAAAAABo-encrypted==", "**Planning** the sum.", "Then the picture."),
		messageItem("msg_abc", "Let me check."),
		callItem("fc_1", "call_add", "add", `{"a":2,"b":3}`),
		callItem("fc_2", "call_now", "now", `{}`),
	)
}

func fullResponse() *model.Response {
	return &model.Response{
		Message: model.Message{
			Role: model.RoleAssistant,
			Parts: []model.Part{
				{Type: model.PartThinking, Text: "**Planning** the sum.", ID: "rs_abc", Opaque: "gAAAAABo-encrypted==", Provider: "openai"},
				{Type: model.PartThinking, Text: "Then the picture.", ID: "rs_abc", Provider: "openai"},
				model.TextPart("Let me check."),
			},
			ToolCalls: []model.ToolCall{
				{ID: "call_add", Name: "add", Arguments: `{"a":2,"b":3}`},
				{ID: "call_now", Name: "now", Arguments: `{}`},
			},
		},
		FinishReason: model.FinishToolCalls,
		Usage:        model.Usage{Requests: 1, InputTokens: 120, CachedInputTokens: 64, OutputTokens: 80, ReasoningTokens: 48, TotalTokens: 200},
		Model:        "o4-mini-2025-04-16",
		ID:           "resp_full",
	}
}

func TestResponsesGenerate(t *testing.T) {
	f := newRespFake(t, fullTurn())
	resp, err := newResponses(t, f, openai.Options{}).Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("go")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fullResponse(), resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// streamAll streams req and returns the deltas and the response, or the
// first error.
func streamAll(t *testing.T, s model.Streamer, req *model.Request) ([]model.Delta, *model.Response, error) {
	t.Helper()
	var deltas []model.Delta
	var final *model.Response
	for c, err := range s.GenerateStream(t.Context(), req) {
		if err != nil {
			return deltas, final, err
		}
		if final != nil {
			t.Fatal("a chunk after the response")
		}
		if c.Delta != nil {
			deltas = append(deltas, *c.Delta)
		}
		final = c.Response
	}
	if final == nil {
		t.Fatal("the stream ended without a response or an error")
	}
	return deltas, final, nil
}

func TestResponsesStream(t *testing.T) {
	f := newRespFake(t, fullTurn())
	m := newResponses(t, f, openai.Options{})
	deltas, resp, err := streamAll(t, m, &model.Request{Messages: []model.Message{model.UserMessage("go")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Delta{
		{Thinking: "**Planning"}, {Thinking: "** the sum."}, {Thinking: "Then the"}, {Thinking: " picture."},
		{Text: "Let "}, {Text: "me "}, {Text: "check."},
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_add", Name: "add"}},
		{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `{"a":2`}},
		{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `,"b":3}`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_now", Name: "now"}},
		{ToolCall: &model.ToolCallDelta{Index: 1, Arguments: `{`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, Arguments: `}`}},
	}
	if diff := cmp.Diff(want, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fullResponse(), resp); diff != "" {
		t.Errorf("streamed response (-want +got):\n%s", diff)
	}
	if stream, _ := f.body(0)["stream"].(bool); !stream {
		t.Errorf("the request did not ask for a stream: %v", f.body(0))
	}
}

// TestResponsesStreamWithoutFinalOutput: a server whose last event leaves
// the output out has sent it item by item.
func TestResponsesStreamWithoutFinalOutput(t *testing.T) {
	f := newRespFake(t, fullTurn())
	f.dropFinalOutput = true
	m := newResponses(t, f, openai.Options{})
	_, resp, err := streamAll(t, m, &model.Request{Messages: []model.Message{model.UserMessage("go")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fullResponse(), resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// TestResponsesReasoningCarried: a second turn carries the first turn's
// reasoning item back as it came, id and encrypted content unchanged, in
// its place before the function call it led to; plain and streamed.
func TestResponsesReasoningCarried(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "generate", true: "stream"}[stream], func(t *testing.T) {
			reasoning := reasoningItem("rs_68af3c2b9e5c81a0", "gAAAAABor8Mr-opaque-content-0123456789==", "Adding two numbers.")
			f := newRespFake(t,
				responseObject("resp_1", "o4-mini", usageOf(50, 0, 30, 16), reasoning, callItem("fc_1", "call_1", "add", `{"a":2,"b":3}`)),
				responseObject("resp_2", "o4-mini", usageOf(90, 48, 8, 0), messageItem("msg_2", "The sum is 5.")),
			)
			m := newResponses(t, f, openai.Options{})
			call := func(req *model.Request) *model.Response {
				if !stream {
					resp, err := m.Generate(t.Context(), req)
					if err != nil {
						t.Fatal(err)
					}
					return resp
				}
				_, resp, err := streamAll(t, m, req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			msgs := []model.Message{model.SystemMessage("You add."), model.UserMessage("add 2 and 3")}
			first := call(&model.Request{Messages: msgs})
			msgs = append(msgs, first.Message, model.Message{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("5")}})
			second := call(&model.Request{Messages: msgs})
			if second.Message.Text() != "The sum is 5." {
				t.Errorf("second answer %q", second.Message.Text())
			}
			input, _ := f.body(1)["input"].([]any)
			want := []any{
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "add 2 and 3"}}},
				asJSON(t, reasoning), // exactly the item the server sent
				map[string]any{"type": "function_call", "call_id": "call_1", "name": "add", "arguments": `{"a":2,"b":3}`},
				map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "5"},
			}
			if diff := cmp.Diff(want, input); diff != "" {
				t.Errorf("the second request's input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponsesFinish(t *testing.T) {
	incomplete := func(reason string) map[string]any {
		r := responseObject("resp_i", "o4-mini", usageOf(10, 0, 100, 90), reasoningItem("rs_1", "enc"), messageItem("msg_1", "Partial"))
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": reason}
		return r
	}
	for _, tt := range []struct {
		name string
		resp map[string]any
		want model.FinishReason
	}{
		{"completed", responseObject("r", "m", usageOf(1, 0, 1, 0), messageItem("m", "x")), model.FinishStop},
		{"max output tokens", incomplete("max_output_tokens"), model.FinishLength},
		{"content filter", incomplete("content_filter"), model.FinishContentFilter},
		{"other reason", incomplete("something_new"), model.FinishOther},
	} {
		for _, stream := range []bool{false, true} {
			f := newRespFake(t, tt.resp)
			m := newResponses(t, f, openai.Options{})
			req := &model.Request{Messages: []model.Message{model.UserMessage("x")}}
			var resp *model.Response
			var err error
			if stream {
				_, resp, err = streamAll(t, m, req)
			} else {
				resp, err = m.Generate(t.Context(), req)
			}
			if err != nil {
				t.Fatalf("%s (stream %v): %v", tt.name, stream, err)
			}
			if resp.FinishReason != tt.want {
				t.Errorf("%s (stream %v): finish %q, want %q", tt.name, stream, resp.FinishReason, tt.want)
			}
		}
	}
}

// TestResponsesFailed: a response whose status is "failed" is a status
// error with the response's error code, plain or streamed
// (response.failed).
func TestResponsesFailed(t *testing.T) {
	for _, tt := range []struct {
		code, message string
		status        int
		is            error
	}{
		{"rate_limit_exceeded", "Rate limit reached for o4-mini", 429, model.ErrRateLimited},
		{"server_error", "The server had an error while processing your request.", 500, nil},
		{"invalid_prompt", "Invalid prompt: flagged", 400, model.ErrInvalidRequest},
	} {
		for _, stream := range []bool{false, true} {
			r := responseObject("resp_f", "o4-mini", nil)
			r["status"] = "failed"
			r["error"] = map[string]any{"code": tt.code, "message": tt.message}
			f := newRespFake(t, r)
			m := newResponses(t, f, openai.Options{})
			req := &model.Request{Messages: []model.Message{model.UserMessage("x")}}
			var err error
			if stream {
				_, _, err = streamAll(t, m, req)
			} else {
				_, err = m.Generate(t.Context(), req)
			}
			var se *model.StatusError
			if !errors.As(err, &se) || se.Code != tt.code || se.Message != tt.message || se.StatusCode != tt.status || se.Provider != "openai" {
				t.Errorf("%s (stream %v): err = %#v", tt.code, stream, err)
				continue
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%s (stream %v): %v does not match %v", tt.code, stream, err, tt.is)
			}
		}
	}
}

func TestResponsesRequestErrors(t *testing.T) {
	f := newRespFake(t)
	m := newResponses(t, f, openai.Options{})
	for _, tt := range []struct {
		name string
		req  *model.Request
		want string
	}{
		{"image in system message", &model.Request{Messages: []model.Message{{Role: model.RoleSystem, Parts: []model.Part{model.ImageURLPart("https://x/y.png")}}}}, "system message"},
		{"image in assistant message", &model.Request{Messages: []model.Message{{Role: model.RoleAssistant, Parts: []model.Part{model.ImageURLPart("https://x/y.png")}}}}, "assistant message"},
		{"empty image", &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartImage}}}}}, "image"},
		{"unknown role", &model.Request{Messages: []model.Message{{Role: "robot"}}}, "robot"},
		{"array tool schema", &model.Request{Messages: []model.Message{model.UserMessage("x")}, Tools: []model.ToolDefinition{{Name: "t", Parameters: json.RawMessage(`[1]`)}}}, `tool "t": parameters: schema is an array`},
		{"malformed tool schema", &model.Request{Messages: []model.Message{model.UserMessage("x")}, Tools: []model.ToolDefinition{{Name: "t", Parameters: json.RawMessage(`{"type":`)}}}, `tool "t": parameters: schema is not valid JSON`},
	} {
		if _, err := m.Generate(t.Context(), tt.req); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
	if f.requests() != 0 {
		t.Errorf("%d invalid requests reached the server", f.requests())
	}
}
