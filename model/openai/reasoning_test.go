package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// rawModel returns a model of the server at base (from rawServer).
func rawModel(t *testing.T, base string) *openai.Model {
	t.Helper()
	m, err := openai.New(openai.Options{Model: "m", BaseURL: base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func thinkingThenText(thinking, text string) []model.Part {
	return []model.Part{{Type: model.PartThinking, Text: thinking, Provider: "openai"}, model.TextPart(text)}
}

// Compatible servers show reasoning in a message's reasoning_content
// (DeepSeek, vLLM), reasoning (OpenRouter, Ollama) or reasoning_details
// (OpenRouter): each becomes a thinking part before the text.
func TestReasoningInMessage(t *testing.T) {
	for _, tt := range []struct {
		name, message string
		want          []model.Part
	}{
		{"reasoning_content", `{"role":"assistant","reasoning_content":"9.8 has more tenths.","content":"9.8"}`,
			thinkingThenText("9.8 has more tenths.", "9.8")},
		{"reasoning", `{"role":"assistant","reasoning":"Count the r's.","content":"3"}`,
			thinkingThenText("Count the r's.", "3")},
		{"reasoning and its details, once", `{"role":"assistant","content":"3","reasoning":"Count the r's.",
			"reasoning_details":[{"type":"reasoning.text","text":"Count the r's.","format":"unknown","index":0}]}`,
			thinkingThenText("Count the r's.", "3")},
		{"details only", `{"role":"assistant","content":"3","reasoning":null,"reasoning_details":[
			{"type":"reasoning.summary","summary":"Counted. "},{"type":"reasoning.encrypted","data":"gAAA"},
			{"type":"reasoning.text","text":"r, r, r."}]}`,
			thinkingThenText("Counted. r, r, r.", "3")},
		{"reasoning not a string", `{"role":"assistant","content":"3","reasoning":{"effort":"low"}}`,
			[]model.Part{model.TextPart("3")}},
		{"empty reasoning_content", `{"role":"assistant","content":"3","reasoning_content":""}`,
			[]model.Part{model.TextPart("3")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := rawServer(t, 200, "application/json",
				`{"id":"c","model":"m","choices":[{"index":0,"message":`+tt.message+`,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`)
			resp, err := rawModel(t, base).Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("q")}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, resp.Message.Parts); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

// sse makes a server-sent event stream of chat completion chunks.
func sse(deltas ...string) string {
	var b strings.Builder
	for _, d := range deltas {
		b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// Streamed, the reasoning comes as thinking deltas, in order, before the
// text, and the response holds all of it in one thinking part.
func TestReasoningInStream(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stream string
	}{
		{"reasoning_content", sse(`{"role":"assistant","content":null,"reasoning_content":"9.8 has "}`,
			`{"reasoning_content":"more tenths."}`, `{"content":"9."}`, `{"content":"8"}`)},
		{"reasoning with details", sse(`{"role":"assistant","content":"","reasoning":"9.8 has ","reasoning_details":[{"type":"reasoning.text","text":"9.8 has "}]}`,
			`{"content":"","reasoning":"more tenths.","reasoning_details":[{"type":"reasoning.text","text":"more tenths."}]}`,
			`{"content":"9.","reasoning":null}`, `{"content":"8"}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := rawModel(t, rawServer(t, 200, "text/event-stream", tt.stream))
			deltas, resp := collect(t, m, &model.Request{Messages: []model.Message{model.UserMessage("q")}})
			want := []model.Delta{{Thinking: "9.8 has "}, {Thinking: "more tenths."}, {Text: "9."}, {Text: "8"}}
			if diff := cmp.Diff(want, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(thinkingThenText("9.8 has more tenths.", "9.8"), resp.Message.Parts); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

// captured is a transport that keeps the bodies of the requests it gets
// and answers each with a short completion, whatever the host.
type captured struct{ bodies [][]byte }

func (c *captured) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	c.bodies = append(c.bodies, body)
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
		Body: io.NopCloser(strings.NewReader(`{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)),
	}, nil
}

// sentMessages returns the messages of a request body, decoded.
func sentMessages(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var w struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	return w.Messages
}

// Thinking goes back only as the reasoning_content of an assistant message
// with tool calls, and only when asked or to DeepSeek's API; OpenAI's API
// and other servers never see it.
func TestReasoningSentBack(t *testing.T) {
	thinking := func(text string) model.Part {
		return model.Part{Type: model.PartThinking, Text: text, Provider: "openai"}
	}
	conversation := []model.Message{
		model.UserMessage("weather in Paris, then in Rome?"),
		{Role: model.RoleAssistant, Parts: []model.Part{thinking("Paris first.")},
			ToolCalls: []model.ToolCall{{ID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}}},
		{Role: model.RoleTool, ToolCallID: "c1", Parts: []model.Part{model.TextPart("sunny")}},
		{Role: model.RoleAssistant, Parts: []model.Part{thinking("Now Rome."),
			// A reasoning item of the Responses API stays out.
			{Type: model.PartThinking, Text: "summary", ID: "rs_1", Opaque: "enc", Provider: "openai"}},
			ToolCalls: []model.ToolCall{{ID: "c2", Name: "weather", Arguments: `{"city":"Rome"}`}}},
		{Role: model.RoleTool, ToolCallID: "c2", Parts: []model.Part{model.TextPart("rain")}},
		{Role: model.RoleAssistant, Parts: []model.Part{thinking("Both known."), model.TextPart("Sunny, then rain.")}},
		model.UserMessage("thanks"),
	}
	for _, tt := range []struct {
		name    string
		opts    openai.Options
		reasons map[int]string // message index: reasoning_content
	}{
		{"OpenAI", openai.Options{APIKey: "k"}, nil},
		{"a compatible server", openai.Options{BaseURL: "http://127.0.0.1:8000/v1"}, nil},
		{"asked", openai.Options{BaseURL: "http://127.0.0.1:8000/v1", SendReasoning: true},
			map[int]string{1: "Paris first.", 3: "Now Rome."}},
		{"DeepSeek", openai.Options{APIKey: "k", BaseURL: "https://api.deepseek.com/v1"},
			map[int]string{1: "Paris first.", 3: "Now Rome."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &captured{}
			tt.opts.Model, tt.opts.MaxRetries, tt.opts.HTTPClient = "m", -1, &http.Client{Transport: c}
			m, err := openai.New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Generate(t.Context(), &model.Request{Messages: conversation}); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(c.bodies[0], []byte("Both known.")) || bytes.Contains(c.bodies[0], []byte("summary")) {
				t.Errorf("thinking of a message without tool calls, or of a reasoning item, was sent:\n%s", c.bodies[0])
			}
			got := map[int]string{}
			for i, msg := range sentMessages(t, c.bodies[0]) {
				if r, ok := msg["reasoning_content"]; ok {
					got[i], _ = r.(string)
				}
				if _, ok := msg["reasoning"]; ok {
					t.Errorf("message %d has a reasoning field", i)
				}
			}
			if diff := cmp.Diff(tt.reasons, got, cmp.Comparer(func(a, b map[int]string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("reasoning_content by message (-want +got):\n%s", diff)
			}
		})
	}
}
