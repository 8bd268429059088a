package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// Workload W1 through an agent: asked to add 2 and 3, the model calls the
// add tool, then answers with the sum. The fake servers answer with bodies
// shaped like the recorded ones (chat completions) or like OpenAI's
// documented objects and events (the Responses API, which no recording
// covers).

// w1Chat is W1's fake chat completions server: a tool call, then, once the
// conversation holds the tool's result, the answer. It checks that the
// result comes back for the call it answers.
func w1Chat(t *testing.T) (string, func() []bool) {
	t.Helper()
	var mu sync.Mutex
	var streamed []bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request %s: %v", raw, err)
		}
		mu.Lock()
		streamed = append(streamed, body.Stream)
		mu.Unlock()
		last := body.Messages[len(body.Messages)-1]
		answered := last.Role == "tool"
		if answered && (last.ToolCallID != "call_w1" || last.Content != "5") {
			t.Errorf("tool result %+v, want 5 for call_w1", last)
		}
		switch {
		case !answered && !body.Stream:
			writeBody(w, 200, "application/json", []byte(`{"id":"chatcmpl-w1-1","object":"chat.completion","created":1755695200,"model":"gpt-4o-mini-2024-07-18",
  "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_w1","type":"function",
    "function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],
  "usage":{"prompt_tokens":81,"completion_tokens":14,"total_tokens":95,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},
    "completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
  "service_tier":"default","system_fingerprint":"fp_1"}`))
		case answered && !body.Stream:
			writeBody(w, 200, "application/json", []byte(`{"id":"chatcmpl-w1-2","object":"chat.completion","created":1755695201,"model":"gpt-4o-mini-2024-07-18",
  "choices":[{"index":0,"message":{"role":"assistant","content":"The sum is 5.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],
  "usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},
    "completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
  "service_tier":"default","system_fingerprint":"fp_1"}`))
		case !answered:
			writeBody(w, 200, "text/event-stream", []byte(
				chatChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"add","arguments":""}}],"refusal":null}`, "", "")+
					chatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":2,"}}]}`, "", "")+
					chatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"b\":3}"}}]}`, "", "")+
					chatChunk(`{}`, "tool_calls", "")+
					chatChunk("", "", `{"prompt_tokens":81,"completion_tokens":14,"total_tokens":95,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`)+
					"data: [DONE]\n\n"))
		default:
			writeBody(w, 200, "text/event-stream", []byte(
				chatChunk(`{"role":"assistant","content":"","refusal":null}`, "", "")+
					chatChunk(`{"content":"The"}`, "", "")+
					chatChunk(`{"content":" sum"}`, "", "")+
					chatChunk(`{"content":" is"}`, "", "")+
					chatChunk(`{"content":" 5."}`, "", "")+
					chatChunk(`{}`, "stop", "")+
					chatChunk("", "", `{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":0}}`)+
					"data: [DONE]\n\n"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), streamed...)
	}
}

// w1Responses is W1's fake Responses API: reasoning and a function call,
// then, once the input holds the call's output, the answer.
func w1Responses(t *testing.T) (string, func() []bool) {
	t.Helper()
	f := newRespFake(t)
	f.answer = func(body map[string]any) map[string]any {
		input, _ := body["input"].([]any)
		for _, it := range input {
			if it, _ := it.(map[string]any); it["type"] == "function_call_output" {
				if it["call_id"] != "call_w1" || it["output"] != "5" {
					t.Errorf("function call output %v, want 5 for call_w1", it)
				}
				return responseObject("resp_w1_2", "o4-mini-2025-04-16", usageOf(120, 64, 9, 0), messageItem("msg_w1", "The sum is 5."))
			}
		}
		return responseObject("resp_w1_1", "o4-mini-2025-04-16", usageOf(81, 0, 14, 8),
			reasoningItem("rs_w1", "gAAAA-w1-encrypted", "Call add."), callItem("fc_w1", "call_w1", "add", `{"a":2,"b":3}`))
	}
	return f.URL(), func() []bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []bool
		for _, b := range f.bodies {
			s, _ := b["stream"].(bool)
			out = append(out, s)
		}
		return out
	}
}

// w1Agent returns the W1 agent on m, served on a fresh runtime (an
// in-process broker and an in-memory store).
func w1Agent(t *testing.T, m model.Model) (*agent.Agent[string], *agent.Runtime) {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	t.Cleanup(func() {
		_ = c.Close()
		_ = b.Close()
	})
	rt := agent.NewRuntime(c, storemem.New(), nil)
	add, err := tool.New("add", "Adds two integers.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New("calc", m, &agent.Options{
		Instructions: "Add numbers with the add tool.",
		Tools:        []tool.Tool{add},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return a, rt
}

// w1Case is W1 on one of the package's APIs.
type w1Case struct {
	name      string
	server    func(t *testing.T) (string, func() []bool)
	newModel  func(base string) (model.Model, error)
	wantUsage model.Usage
	wantUSD   float64
}

func w1Cases() []w1Case {
	return []w1Case{
		{
			name:   "chat completions",
			server: w1Chat,
			newModel: func(base string) (model.Model, error) {
				return openai.New(openai.Options{Model: "gpt-4o-mini", BaseURL: base, APIKey: "sk-test"})
			},
			wantUsage: model.Usage{Requests: 2, InputTokens: 201, CachedInputTokens: 64, OutputTokens: 23, TotalTokens: 224},
			// gpt-4o-mini: $0.15 a million input tokens, $0.075 cached,
			// $0.60 output.
			wantUSD: (81*0.15 + 14*0.60 + 56*0.15 + 64*0.075 + 9*0.60) / 1e6,
		},
		{
			name:   "responses",
			server: w1Responses,
			newModel: func(base string) (model.Model, error) {
				return openai.NewResponses(openai.Options{Model: "o4-mini", BaseURL: base, APIKey: "sk-test"})
			},
			wantUsage: model.Usage{Requests: 2, InputTokens: 201, CachedInputTokens: 64, OutputTokens: 23, ReasoningTokens: 8, TotalTokens: 224},
			// o4-mini: $1.10 a million input tokens, $0.275 cached, $4.40
			// output (reasoning included).
			wantUSD: (81*1.10 + 14*4.40 + 56*1.10 + 64*0.275 + 9*4.40) / 1e6,
		},
	}
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAgentW1(t *testing.T) {
	for _, tc := range w1Cases() {
		t.Run(tc.name, func(t *testing.T) {
			base, streamed := tc.server(t)
			m, err := tc.newModel(base)
			if err != nil {
				t.Fatal(err)
			}
			a, rt := w1Agent(t, m)
			out, err := a.Run(runCtx(t), rt, "add 2 and 3", nil)
			if err != nil {
				t.Fatal(err)
			}
			if out.Output != "The sum is 5." || out.Steps != 2 {
				t.Errorf("output %q after %d model calls", out.Output, out.Steps)
			}
			if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "add" || out.ToolCalls[0].Result == nil || out.ToolCalls[0].Result.Text() != "5" {
				t.Errorf("tool calls %+v, want one call of add that returned 5", out.ToolCalls)
			}
			if diff := cmp.Diff(tc.wantUsage, out.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if math.Abs(out.Cost.USD-tc.wantUSD) > 1e-12 || len(out.Cost.Unpriced) != 0 {
				t.Errorf("cost %+v, want $%.9f", out.Cost, tc.wantUSD)
			}
			if diff := cmp.Diff([]bool{false, false}, streamed()); diff != "" {
				t.Errorf("streamed requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentW1Stream(t *testing.T) {
	for _, tc := range w1Cases() {
		t.Run(tc.name, func(t *testing.T) {
			base, streamed := tc.server(t)
			m, err := tc.newModel(base)
			if err != nil {
				t.Fatal(err)
			}
			a, rt := w1Agent(t, m)
			var text strings.Builder
			var deltas, calls int
			var out *agent.OutputEvent
			for ev, err := range a.RunStream(runCtx(t), rt, "add 2 and 3", nil) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev.Kind {
				case agent.EventDelta:
					deltas++
					text.WriteString(ev.Delta.Text)
				case agent.EventToolCall:
					calls++
				case agent.EventOutput:
					out = ev.Output
				}
			}
			if text.String() != "The sum is 5." || deltas < 4 {
				t.Errorf("%d deltas with the text %q, want the answer in pieces", deltas, text.String())
			}
			if calls != 1 || out == nil || out.Status != "complete" || string(out.Content) != `"The sum is 5."` {
				t.Fatalf("%d tool calls, output %+v", calls, out)
			}
			if diff := cmp.Diff(tc.wantUsage, out.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if math.Abs(out.Cost.USD-tc.wantUSD) > 1e-12 {
				t.Errorf("cost %+v, want $%.9f", out.Cost, tc.wantUSD)
			}
			if diff := cmp.Diff([]bool{true, true}, streamed()); diff != "" {
				t.Errorf("streamed requests (-want +got):\n%s", diff)
			}
		})
	}
}
