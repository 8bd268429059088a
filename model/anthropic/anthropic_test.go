package anthropic_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/anthropic"
)

var okReply = reply{ID: "msg_1", Model: "claude-haiku-4-5-20251001", Blocks: []apiBlock{textBlock("ok")}, Stop: "end_turn",
	Usage: map[string]int64{"input_tokens": 3, "output_tokens": 1}}

// sent returns the body of the request the adapter sends for req, decoded.
func sent(t *testing.T, opts anthropic.Options, req *model.Request) map[string]any {
	t.Helper()
	f := newFake(t, answerWith(okReply))
	if _, err := f.model(t, opts).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(f.requests()[0], &body); err != nil {
		t.Fatal(err)
	}
	return body
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

// png is the start of a PNG image, enough for its type to be detected.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestRequest(t *testing.T) {
	pngB64 := base64.StdEncoding.EncodeToString(png)
	weather := model.ToolDefinition{Name: "weather", Description: "Weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	clock := model.ToolDefinition{Name: "clock"}
	for _, tc := range []struct {
		name string
		opts anthropic.Options
		req  model.Request
		want string
	}{
		{
			name: "system prompt, images and the default bound",
			req: model.Request{Messages: []model.Message{
				model.SystemMessage("Be brief."),
				model.SystemMessage("Use metric units."),
				{Role: model.RoleUser, Parts: []model.Part{
					model.TextPart("What are these?"),
					model.TextPart(""),
					model.ImagePart("image/png", png),
					{Type: model.PartImage, Data: png},
					model.ImageURLPart("https://example.com/cat.jpg"),
					model.ImageURLPart("data:image/gif;base64,R0lGODlh"),
				}},
			}},
			want: `{"model":"claude-haiku-4-5","max_tokens":8192,
				"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use metric units.","cache_control":{"type":"ephemeral"}}],
				"messages":[{"role":"user","content":[
					{"type":"text","text":"What are these?"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngB64 + `"}},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngB64 + `"}},
					{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
					{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGODlh"},"cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "tool calls and their results, one turn for the results",
			opts: anthropic.Options{MaxTokens: 500},
			req: model.Request{
				Tools:       []model.ToolDefinition{weather, clock},
				Temperature: ptr(0.2),
				Messages: []model.Message{
					model.UserMessage("Weather and time in Oslo?"),
					{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("Looking.")}, ToolCalls: []model.ToolCall{
						{ID: "t1", Name: "weather", Arguments: `{"city":"Oslo"}`},
						{ID: "t2", Name: "clock", Arguments: ``},
						{ID: "t3", Name: "weather", Arguments: `{"city": "Os`},
						{ID: "t4", Name: "weather", Arguments: `["Oslo"]`},
					}},
					{Role: model.RoleTool, ToolCallID: "t1", ToolName: "weather", Parts: []model.Part{model.TextPart("-3 °C, "), model.TextPart("snow")}},
					{Role: model.RoleTool, ToolCallID: "t2", ToolName: "clock", Parts: []model.Part{model.TextPart("14:02")}},
					{Role: model.RoleTool, ToolCallID: "t3", ToolName: "weather", IsError: true, Parts: []model.Part{model.TextPart("invalid arguments")}},
					{Role: model.RoleTool, ToolCallID: "t4", ToolName: "weather", IsError: true},
				},
			},
			want: `{"model":"claude-haiku-4-5","max_tokens":500,"temperature":0.2,
				"tools":[
					{"name":"weather","description":"Weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
					{"name":"clock","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}],
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Weather and time in Oslo?"}]},
					{"role":"assistant","content":[
						{"type":"text","text":"Looking."},
						{"type":"tool_use","id":"t1","name":"weather","input":{"city":"Oslo"}},
						{"type":"tool_use","id":"t2","name":"clock","input":{}},
						{"type":"tool_use","id":"t3","name":"weather","input":{"invalid_arguments":"{\"city\": \"Os"}},
						{"type":"tool_use","id":"t4","name":"weather","input":{"invalid_arguments":"[\"Oslo\"]"}}]},
					{"role":"user","content":[
						{"type":"tool_result","tool_use_id":"t1","content":"-3 °C, snow"},
						{"type":"tool_result","tool_use_id":"t2","content":"14:02"},
						{"type":"tool_result","tool_use_id":"t3","content":"invalid arguments","is_error":true},
						{"type":"tool_result","tool_use_id":"t4","is_error":true,"cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "a tool result with an image, then the user",
			opts: anthropic.Options{PromptCaching: anthropic.CachingOff},
			req: model.Request{Tools: []model.ToolDefinition{clock}, Messages: []model.Message{
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "clock", Arguments: "{}"}}},
				{Role: model.RoleTool, ToolCallID: "t1", Parts: []model.Part{model.TextPart("the clock:"), model.ImagePart("image/png", png)}},
				model.UserMessage("What time is it?"),
			}},
			want: `{"model":"claude-haiku-4-5","max_tokens":8192,
				"tools":[{"name":"clock","input_schema":{"type":"object","properties":{}}}],
				"messages":[
					{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"clock","input":{}}]},
					{"role":"user","content":[
						{"type":"tool_result","tool_use_id":"t1","content":[
							{"type":"text","text":"the clock:"},
							{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngB64 + `"}}]},
						{"type":"text","text":"What time is it?"}]}]}`,
		},
		{
			name: "thinking: first in its turn, signed only, raised bound, no temperature",
			opts: anthropic.Options{ThinkingBudget: 4096},
			req: model.Request{MaxTokens: 1000, Temperature: ptr(0.0), Messages: []model.Message{
				model.UserMessage("Hi"),
				{Role: model.RoleAssistant, Parts: []model.Part{
					model.TextPart("Hello."),
					{Type: model.PartThinking, Text: "The user greets.", Signature: "sig1", Provider: "anthropic"},
					{Type: model.PartThinking, Opaque: "redacted1", Provider: "anthropic"},
					{Type: model.PartThinking, Text: "unsigned, cannot be checked"},
					{Type: model.PartThinking, Text: "another provider's", ID: "rs_1", Opaque: "enc", Provider: "openai"},
				}, ToolCalls: []model.ToolCall{{ID: "c1", Name: "clock", Arguments: "{}", Signature: "gemini-sig", Provider: "gemini"}}},
				{Role: model.RoleTool, ToolCallID: "c1", Parts: []model.Part{model.TextPart("noon")}},
			}},
			want: `{"model":"claude-haiku-4-5","max_tokens":5096,"thinking":{"type":"enabled","budget_tokens":4096},
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Hi"}]},
					{"role":"assistant","content":[
						{"type":"thinking","thinking":"The user greets.","signature":"sig1"},
						{"type":"redacted_thinking","data":"redacted1"},
						{"type":"text","text":"Hello."},
						{"type":"tool_use","id":"c1","name":"clock","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"noon","cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "thinking within the default bound, an assistant turn last",
			opts: anthropic.Options{ThinkingBudget: 2048},
			req: model.Request{Messages: []model.Message{
				model.UserMessage("Hi"),
				{Role: model.RoleAssistant, Parts: []model.Part{
					{Type: model.PartThinking, Text: "t", Signature: "s", Provider: "anthropic"}}},
			}},
			want: `{"model":"claude-haiku-4-5","max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":2048},
				"messages":[
					{"role":"user","content":[{"type":"text","text":"Hi"}]},
					{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}]}`,
		},
		{
			name: "structured output",
			opts: anthropic.Options{PromptCaching: anthropic.CachingOff},
			req: model.Request{MaxTokens: 256, Output: &model.OutputSchema{Name: "city", Strict: true,
				Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)},
				Messages: []model.Message{model.UserMessage("The capital of France?")}},
			want: `{"model":"claude-haiku-4-5","max_tokens":256,
				"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}},
				"messages":[{"role":"user","content":[{"type":"text","text":"The capital of France?"}]}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sent(t, tc.opts, &tc.req)
			if diff := cmp.Diff(decode(t, tc.want), got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolChoice(t *testing.T) {
	tools := []model.ToolDefinition{{Name: "clock"}}
	for _, tc := range []struct {
		choice   model.ToolChoice
		parallel *bool
		tools    []model.ToolDefinition
		want     any // the tool_choice sent; nil for none
	}{
		{"", nil, tools, nil},
		{model.ToolChoiceAuto, ptr(true), tools, nil},
		{"", ptr(false), tools, map[string]any{"type": "auto", "disable_parallel_tool_use": true}},
		{model.ToolChoiceNone, ptr(false), tools, map[string]any{"type": "none"}},
		{model.ToolChoiceRequired, nil, tools, map[string]any{"type": "any"}},
		{model.ToolChoiceRequired, ptr(false), tools, map[string]any{"type": "any", "disable_parallel_tool_use": true}},
		{"clock", nil, tools, map[string]any{"type": "tool", "name": "clock"}},
		{"clock", ptr(false), tools, map[string]any{"type": "tool", "name": "clock", "disable_parallel_tool_use": true}},
		{model.ToolChoiceRequired, ptr(false), nil, nil}, // the API takes a tool choice only with tools
	} {
		got := sent(t, anthropic.Options{}, &model.Request{Messages: []model.Message{model.UserMessage("hi")},
			Tools: tc.tools, ToolChoice: tc.choice, ParallelToolCalls: tc.parallel})
		if diff := cmp.Diff(tc.want, got["tool_choice"]); diff != "" {
			t.Errorf("choice %q, parallel %v, %d tools: tool_choice (-want +got):\n%s", tc.choice, tc.parallel, len(tc.tools), diff)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	user := model.UserMessage("hi")
	for _, tc := range []struct {
		name string
		req  model.Request
		want string
	}{
		{"unknown role", model.Request{Messages: []model.Message{{Role: "narrator", Parts: []model.Part{model.TextPart("x")}}}}, `unknown role "narrator"`},
		{"image in a system message", model.Request{Messages: []model.Message{{Role: model.RoleSystem, Parts: []model.Part{model.ImagePart("image/png", png)}}}}, "takes only text"},
		{"image URL of another scheme", model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{model.ImageURLPart("ftp://x/y.png")}}}}, "want http(s) or data"},
		{"image without data", model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartImage}}}}}, "neither data nor URL"},
		{"bad data URL", model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{model.ImageURLPart("data:image/png;base64,@@@")}}}}, "data URL"},
		{"unknown part", model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: "video"}}}}}, `unknown part type "video"`},
		{"schema not an object", model.Request{Messages: []model.Message{user}, Tools: []model.ToolDefinition{{Name: "t", Parameters: json.RawMessage(`[1]`)}}}, `tool "t": parameters: schema is not a JSON object`},
		{"schema not JSON", model.Request{Messages: []model.Message{user}, Tools: []model.ToolDefinition{{Name: "t", Parameters: json.RawMessage(`{"type":`)}}}, `tool "t": parameters: schema is not valid JSON`},
		{"output schema not an object", model.Request{Messages: []model.Message{user}, Output: &model.OutputSchema{Schema: json.RawMessage(`true`)}}, "output schema: want a JSON object"},
		{"output schema not JSON", model.Request{Messages: []model.Message{user}, Output: &model.OutputSchema{Schema: json.RawMessage(`{"type"`)}}, "output schema is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, answerWith(okReply))
			_, err := f.model(t, anthropic.Options{}).Generate(context.Background(), &tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "anthropic: ") {
				t.Errorf("err = %v; want one containing %q", err, tc.want)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	f := newFake(t, answerWith(okReply))
	m := f.model(t, anthropic.Options{APIKey: "sk-test", Headers: map[string]string{"anthropic-beta": "interleaved-thinking-2025-05-14"}})
	if _, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	h := f.headers[0]
	for k, want := range map[string]string{
		"X-Api-Key":         "sk-test",
		"Anthropic-Version": "2023-06-01",
		"Content-Type":      "application/json",
		"Anthropic-Beta":    "interleaved-thinking-2025-05-14",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if f.paths[0] != "POST /v1/messages" {
		t.Errorf("request to %s", f.paths[0])
	}
}

func TestResponse(t *testing.T) {
	r := reply{ID: "msg_9", Model: "claude-sonnet-4-5-20250929", Stop: "tool_use",
		Blocks: []apiBlock{
			thinkingBlock("Think.", "sig"),
			redactedBlock("opaque"),
			textBlock("Checking. "),
			textBlock(""),
			textBlock("Both."),
			toolUse("toolu_1", "weather", `{"city":"Oslo"}`),
			{Type: "server_tool_use", ID: "srvtoolu_1", Name: "web_search", Input: json.RawMessage(`{}`)},
			toolUse("toolu_2", "clock", `{}`),
		},
		Usage: map[string]int64{"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000, "output_tokens": 5}}
	want := &model.Response{
		Message: model.Message{Role: model.RoleAssistant,
			Parts: []model.Part{
				{Type: model.PartThinking, Text: "Think.", Signature: "sig", Provider: "anthropic"},
				{Type: model.PartThinking, Opaque: "opaque", Provider: "anthropic"},
				model.TextPart("Checking. "),
				model.TextPart("Both."),
			},
			ToolCalls: []model.ToolCall{
				{ID: "toolu_1", Name: "weather", Arguments: `{"city":"Oslo"}`},
				{ID: "toolu_2", Name: "clock", Arguments: `{}`},
			}},
		FinishReason: model.FinishToolCalls,
		Usage: model.Usage{Requests: 1, InputTokens: 1210, CachedInputTokens: 1000, CacheWriteInputTokens: 200,
			OutputTokens: 5, TotalTokens: 1215},
		Model: "claude-sonnet-4-5-20250929",
		ID:    "msg_9",
	}
	f := newFake(t, answerWith(r))
	m := f.model(t, anthropic.Options{})
	req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
	got, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	// The same message streamed: its deltas, then the same response.
	deltas, got := collect(t, m, req)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed response (-want +got):\n%s", diff)
	}
	wantDeltas := []model.Delta{
		{Thinking: "Think."},
		{Text: "Checking. "}, {Text: "Both."},
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "toolu_1", Name: "weather"}},
		{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `{"city"`}},
		{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `:"Oslo"}`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, ID: "toolu_2", Name: "clock"}},
	}
	if diff := cmp.Diff(wantDeltas, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

func TestFinishReasons(t *testing.T) {
	for stop, want := range map[string]model.FinishReason{
		"end_turn":                      model.FinishStop,
		"stop_sequence":                 model.FinishStop,
		"tool_use":                      model.FinishToolCalls,
		"max_tokens":                    model.FinishLength,
		"model_context_window_exceeded": model.FinishLength,
		"refusal":                       model.FinishContentFilter,
		"pause_turn":                    model.FinishOther,
		"something_new":                 model.FinishOther,
	} {
		r := okReply
		r.Stop = stop
		f := newFake(t, answerWith(r))
		resp, err := f.model(t, anthropic.Options{}).Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.FinishReason != want {
			t.Errorf("stop_reason %s: %s; want %s", stop, resp.FinishReason, want)
		}
	}
}

// collect streams req from m and returns the deltas and the response.
func collect(t *testing.T, m *anthropic.Model, req *model.Request) ([]model.Delta, *model.Response) {
	t.Helper()
	var deltas []model.Delta
	var resp *model.Response
	for chunk, err := range m.GenerateStream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if resp != nil {
			t.Fatal("a chunk after the response")
		}
		if chunk.Delta != nil {
			deltas = append(deltas, *chunk.Delta)
		}
		resp = chunk.Response
	}
	if resp == nil {
		t.Fatal("no response")
	}
	return deltas, resp
}

// A turn with thinking and a tool call, then the tool's result: the second
// request carries the first response's thinking blocks as they came, byte
// for byte, signature included, before the text and the tool call.
func TestThinkingSentBackUnchanged(t *testing.T) {
	// Quotes, a newline, <, > and &, and non-ASCII text, as the API may send them.
	thinking := "The user wants \"Oslo\".\nCheck <weather> & time, naïvely."
	signature := "EtwCCkYICxgCKkCEz+rKTIOYZe9QecQgik+7E+vvKt4yO1gnBuWc27qeE01iRBUIVDCuDDcS9/A//OwuDQdo6Ev6D=="
	first := reply{ID: "msg_1", Model: "claude-sonnet-4-5-20250929", Stop: "tool_use",
		Blocks: []apiBlock{
			thinkingBlock(thinking, signature),
			redactedBlock("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"),
			textBlock("Let me check."),
			toolUse("toolu_1", "weather", `{"city":"Oslo"}`),
		},
		Usage: map[string]int64{"input_tokens": 50, "output_tokens": 80}}
	second := reply{ID: "msg_2", Model: "claude-sonnet-4-5-20250929", Stop: "end_turn",
		Blocks: []apiBlock{textBlock("It is -3 °C in Oslo.")},
		Usage:  map[string]int64{"input_tokens": 150, "output_tokens": 12}}
	// The blocks as the API sent them in the first response.
	var sentByAPI struct{ Content []json.RawMessage }
	if err := json.Unmarshal([]byte(first.json()), &sentByAPI); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "generate", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			f := newFake(t, answerWith(first, second))
			m := f.model(t, anthropic.Options{ThinkingBudget: 2048})
			req := &model.Request{
				Tools:    []model.ToolDefinition{{Name: "weather"}},
				Messages: []model.Message{model.UserMessage("Weather in Oslo?")},
			}
			call := func() *model.Response {
				if stream {
					_, resp := collect(t, m, req)
					return resp
				}
				resp, err := m.Generate(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			resp := call()
			req.Messages = append(req.Messages, resp.Message, model.Message{
				Role: model.RoleTool, ToolCallID: resp.Message.ToolCalls[0].ID, ToolName: "weather",
				Parts: []model.Part{model.TextPart("-3 °C")}})
			if got := call().Message.Text(); got != "It is -3 °C in Oslo." {
				t.Errorf("second answer %q", got)
			}
			var req2 struct {
				Messages []struct {
					Role    string
					Content []json.RawMessage
				}
			}
			if err := json.Unmarshal(f.requests()[1], &req2); err != nil {
				t.Fatal(err)
			}
			if len(req2.Messages) != 3 || req2.Messages[1].Role != "assistant" || len(req2.Messages[1].Content) != 4 {
				t.Fatalf("second request: %s", f.requests()[1])
			}
			for i, blk := range req2.Messages[1].Content {
				if !bytes.Equal(blk, sentByAPI.Content[i]) {
					t.Errorf("assistant block %d sent back:\n%s\nthe API sent:\n%s", i, blk, sentByAPI.Content[i])
				}
			}
		})
	}
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(n int, w http.ResponseWriter) bool // true when it answered
		wantN  int
	}{
		{"429 with Retry-After, then success", func(n int, w http.ResponseWriter) bool {
			if n == 0 {
				w.Header().Set("Retry-After", "0.01")
				errorAnswer(w, 429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
				return true
			}
			return false
		}, 2},
		{"500 twice, then success", func(n int, w http.ResponseWriter) bool {
			if n < 2 {
				w.Header().Set("Retry-After-Ms", "1")
				errorAnswer(w, 500, "api_error", "Internal server error")
				return true
			}
			return false
		}, 3},
		{"529 overloaded, then success", func(n int, w http.ResponseWriter) bool {
			if n == 0 {
				w.Header().Set("Retry-After-Ms", "1")
				errorAnswer(w, 529, "overloaded_error", "Overloaded")
				return true
			}
			return false
		}, 2},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: ", streamed"}[stream], func(t *testing.T) {
				ok := answerWith(okReply)
				f := newFake(t, func(n int, body []byte, w http.ResponseWriter) {
					if !tc.answer(n, w) {
						ok(n, body, w)
					}
				})
				m := f.model(t, anthropic.Options{})
				req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
				var resp *model.Response
				if stream {
					_, resp = collect(t, m, req)
				} else {
					var err error
					if resp, err = m.Generate(context.Background(), req); err != nil {
						t.Fatal(err)
					}
				}
				if resp.Message.Text() != "ok" || len(f.requests()) != tc.wantN {
					t.Errorf("answer %q after %d requests; want ok after %d", resp.Message.Text(), len(f.requests()), tc.wantN)
				}
			})
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		typ, msg string
		want     []error
		notWant  []error
	}{
		{"context too long", 400, "invalid_request_error", "prompt is too long: 210345 tokens > 200000 maximum",
			[]error{model.ErrContextTooLong, model.ErrInvalidRequest}, []error{model.ErrAuthentication}},
		{"invalid request", 400, "invalid_request_error", "messages: text content blocks must be non-empty",
			[]error{model.ErrInvalidRequest}, []error{model.ErrContextTooLong}},
		{"authentication", 401, "authentication_error", "invalid x-api-key",
			[]error{model.ErrAuthentication}, []error{model.ErrInvalidRequest}},
		{"permission", 403, "permission_error", "Your API key does not have permission to use the specified resource.",
			[]error{model.ErrAuthentication}, nil},
		{"overloaded past the retries", 529, "overloaded_error", "Overloaded",
			[]error{model.ErrOverloaded}, []error{model.ErrRateLimited}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, body []byte, w http.ResponseWriter) {
				w.Header().Set("Retry-After-Ms", "1")
				errorAnswer(w, tc.status, tc.typ, tc.msg)
			})
			_, err := f.model(t, anthropic.Options{MaxRetries: 1}).Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
			var se *model.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v; want a *model.StatusError", err)
			}
			wantSE := &model.StatusError{Provider: "anthropic", StatusCode: tc.status, Type: tc.typ, Message: tc.msg, RequestID: "req_err", RetryAfter: time.Millisecond}
			if diff := cmp.Diff(wantSE, se); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for _, target := range tc.want {
				if !errors.Is(err, target) {
					t.Errorf("err does not match %v", target)
				}
			}
			for _, target := range tc.notWant {
				if errors.Is(err, target) {
					t.Errorf("err matches %v", target)
				}
			}
			wantN := 1
			if se.Retryable() {
				wantN = 2
			}
			if n := len(f.requests()); n != wantN {
				t.Errorf("%d requests; want %d", n, wantN)
			}
		})
	}
}

func TestAnswerNotJSON(t *testing.T) {
	f := newFake(t, func(n int, body []byte, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>proxy login</html>")
	})
	_, err := f.model(t, anthropic.Options{}).Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
	if err == nil || !strings.Contains(err.Error(), `content type "text/html"`) {
		t.Errorf("err = %v", err)
	}
}

// event writes one server-sent event.
func event(w io.Writer, typ, data string) {
	_, _ = io.WriteString(w, "event: "+typ+"\ndata: "+data+"\n\n")
}

const (
	startEvent = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`
	textStart  = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	textDelta  = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`
)

func TestStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		check  func(t *testing.T, err error)
		deltas int
	}{
		{"the stream ends before message_stop", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, "message_start", startEvent)
			event(w, "content_block_start", textStart)
			event(w, "content_block_delta", textDelta)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "before message_stop") {
				t.Errorf("err = %v; want io.ErrUnexpectedEOF", err)
			}
		}, 1},
		{"the connection is cut", func(w http.ResponseWriter) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			body := "event: message_start\ndata: " + startEvent + "\n\nevent: content_block_start\ndata: " + textStart +
				"\n\nevent: content_block_delta\ndata: " + textDelta + "\n\nevent: content_block_delta\ndata: {\"type\":\"content_"
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 100000\r\n\r\n" + body)
			_ = buf.Flush()
		}, func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("err = %v; want io.ErrUnexpectedEOF", err)
			}
		}, 1},
		{"a malformed event", func(w http.ResponseWriter) {
			event(w, "message_start", startEvent)
			event(w, "content_block_start", textStart)
			event(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"`)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, anthropic.ErrMalformedStream) {
				t.Errorf("err = %v; want ErrMalformedStream", err)
			}
		}, 0},
		{"a delta of a block not started", func(w http.ResponseWriter) {
			event(w, "message_start", startEvent)
			event(w, "content_block_delta", textDelta)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, anthropic.ErrMalformedStream) {
				t.Errorf("err = %v; want ErrMalformedStream", err)
			}
		}, 0},
		{"a delta of the wrong kind", func(w http.ResponseWriter) {
			event(w, "message_start", startEvent)
			event(w, "content_block_start", textStart)
			event(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, anthropic.ErrMalformedStream) {
				t.Errorf("err = %v; want ErrMalformedStream", err)
			}
		}, 0},
		{"an error event", func(w http.ResponseWriter) {
			w.Header().Set("Request-Id", "req_stream")
			event(w, "message_start", startEvent)
			event(w, "content_block_start", textStart)
			event(w, "content_block_delta", textDelta)
			event(w, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		}, func(t *testing.T, err error) {
			var se *model.StatusError
			if !errors.As(err, &se) || !errors.Is(err, model.ErrOverloaded) {
				t.Fatalf("err = %v; want a *model.StatusError matching ErrOverloaded", err)
			}
			want := &model.StatusError{Provider: "anthropic", StatusCode: 529, Type: "overloaded_error", Message: "Overloaded", RequestID: "req_stream"}
			if diff := cmp.Diff(want, se); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		}, 1},
		{"an error event of an unknown type", func(w http.ResponseWriter) {
			event(w, "error", `{"type":"error","error":{"type":"brand_new_error","message":"?"}}`)
		}, func(t *testing.T, err error) {
			var se *model.StatusError
			if !errors.As(err, &se) || se.StatusCode != 500 || !se.Retryable() {
				t.Errorf("err = %v; want a retryable *model.StatusError", err)
			}
		}, 0},
		{"JSON instead of a stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, okReply.json())
		}, func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "not an event stream") {
				t.Errorf("err = %v", err)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, body []byte, w http.ResponseWriter) { tc.answer(w) })
			m := f.model(t, anthropic.Options{})
			var err error
			deltas := 0
			for chunk, cerr := range m.GenerateStream(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
				if chunk.Response != nil {
					t.Fatal("a response from a failed stream")
				}
				if chunk.Delta != nil {
					deltas++
				}
				if cerr != nil {
					err = cerr
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			tc.check(t, err)
			if deltas != tc.deltas {
				t.Errorf("%d deltas before the error; want %d", deltas, tc.deltas)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests: a stream that has begun is not retried", n)
			}
		})
	}
}

// trackedBody records whether a response body was closed.
type trackedBody struct {
	io.ReadCloser
	closed *atomic.Bool
}

func (b trackedBody) Close() error { b.closed.Store(true); return b.ReadCloser.Close() }

type closeRecorder struct {
	mu     sync.Mutex
	bodies []*atomic.Bool
}

func (c *closeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	closed := &atomic.Bool{}
	c.mu.Lock()
	c.bodies = append(c.bodies, closed)
	c.mu.Unlock()
	resp.Body = trackedBody{resp.Body, closed}
	return resp, nil
}

func TestStreamStopsEarly(t *testing.T) {
	r := okReply
	r.Blocks = []apiBlock{textBlock("one two three four")}
	f := newFake(t, answerWith(r))
	rec := &closeRecorder{}
	m := f.model(t, anthropic.Options{HTTPClient: &http.Client{Transport: rec}})
	n := 0
	for chunk, err := range m.GenerateStream(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Delta != nil {
			n++
			break
		}
	}
	if n != 1 || len(rec.bodies) != 1 || !rec.bodies[0].Load() {
		t.Errorf("%d deltas; the body is not closed after the consumer stopped", n)
	}
}

func TestTimeout(t *testing.T) {
	done := make(chan struct{})
	f := newFake(t, func(n int, body []byte, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		<-done
	})
	t.Cleanup(func() { close(done) }) // before the server closes
	req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
	m := f.model(t, anthropic.Options{Timeout: 20 * time.Millisecond})
	if _, err := m.Generate(context.Background(), req); !errors.Is(err, model.ErrTimeout) {
		t.Errorf("Generate: err = %v; want ErrTimeout", err)
	}
	for _, err := range m.GenerateStream(context.Background(), req) {
		if !errors.Is(err, model.ErrTimeout) {
			t.Errorf("GenerateStream: err = %v; want ErrTimeout", err)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests: an attempt that timed out is retried", n)
	}
}

func TestCancel(t *testing.T) {
	done := make(chan struct{})
	arrived := make(chan struct{}, 1)
	f := newFake(t, func(n int, body []byte, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		arrived <- struct{}{}
		<-done
	})
	t.Cleanup(func() { close(done) })
	m := f.model(t, anthropic.Options{Timeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := m.Generate(ctx, &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want context.Canceled", err)
	}
}

func TestNew(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	if _, err := anthropic.New(anthropic.Options{APIKey: "k"}); !errors.Is(err, model.ErrNoModel) {
		t.Errorf("no model: err = %v; want ErrNoModel", err)
	}
	_, err := anthropic.FromEnv("claude-haiku-4-5")
	if !errors.Is(err, model.ErrNoModel) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("no key: err = %v; want ErrNoModel naming ANTHROPIC_API_KEY", err)
	}
	for _, opts := range []anthropic.Options{
		{Model: "m", APIKey: "k", BaseURL: "api.anthropic.com"},
		{Model: "m", APIKey: "k", BaseURL: "ftp://x"},
		{Model: "m", APIKey: "k", MaxTokens: -1},
		{Model: "m", APIKey: "k", ThinkingBudget: -1},
		{Model: "m", APIKey: "k", PromptCaching: "sometimes"},
	} {
		if _, err := anthropic.New(opts); err == nil {
			t.Errorf("New(%+v) accepted", opts)
		}
	}

	// The environment: the key and the base URL, which may end in /v1.
	f := newFake(t, answerWith(okReply))
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_BASE_URL", f.srv.URL+"/v1/")
	m, err := anthropic.FromEnv("claude-haiku-4-5")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "anthropic:claude-haiku-4-5" {
		t.Errorf("Name() = %q", m.Name())
	}
	if _, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if f.paths[0] != "POST /v1/messages" || f.headers[0].Get("X-Api-Key") != "env-key" {
		t.Errorf("request %s with key %q", f.paths[0], f.headers[0].Get("X-Api-Key"))
	}
}

func TestOptionsLogValueRedactsKey(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "opts", anthropic.Options{Model: "m", APIKey: "sk-secret"})
	if strings.Contains(buf.String(), "sk-secret") || !strings.Contains(buf.String(), "REDACTED") {
		t.Errorf("logged %s", buf.String())
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFake(t, answerWith(okReply))
	if _, err := f.model(t, anthropic.Options{Logger: log, APIKey: "sk-secret"}).Generate(context.Background(),
		&model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "anthropic: http attempt") || !strings.Contains(s, "status=200") || strings.Contains(s, "sk-secret") {
		t.Errorf("logged %s", s)
	}
}
