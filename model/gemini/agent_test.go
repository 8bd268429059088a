package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/gemini"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func newRuntime(t *testing.T) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	return agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)
}

type operands struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() tool.Tool {
	return tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in operands) (int, error) {
		return in.A + in.B, nil
	}))
}

const signature = "CssBAb4+9vtA0YNySGDhNbWUekpgT0C4JzfoLAMCUxxSlERpI2LVij53p/T9qWJSHxNvQmxdYycF8yf/oRMZ0cnD1wKxww2tYiJpDtgJXwJRLKNaB6Yp"

// w1Server answers like gemini-2.5-flash does in the recorded traffic: a
// function call with a thought signature, then, once the function's
// response has come, the answer; as JSON to generateContent, as
// server-sent events to streamGenerateContent?alt=sse. It keeps the
// bodies it was sent.
type w1Server struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newW1Server(t *testing.T) *w1Server {
	s := &w1Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		answered := strings.Contains(string(b), `"functionResponse"`)
		var chunks []string
		if !answered {
			chunks = []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"add","args":{"a":2,"b":3}},"thoughtSignature":"` + signature + `"}],"role":"model"},` +
				`"finishReason":"STOP","index":0,"finishMessage":"Model generated function call(s)."}],` +
				`"usageMetadata":{"promptTokenCount":155,"candidatesTokenCount":18,"totalTokenCount":223,"thoughtsTokenCount":50},` +
				`"modelVersion":"gemini-2.5-flash","responseId":"XTGwabD8KpaxkdUP3MTwoAk"}`}
		} else {
			chunks = []string{
				`{"candidates":[{"content":{"parts":[{"text":"2 + 3"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":186,"totalTokenCount":186},"modelVersion":"gemini-2.5-flash","responseId":"XjGwaaPEI_H3nsEP2v-88AQ"}`,
				`{"candidates":[{"content":{"parts":[{"text":" = 5"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":186,"candidatesTokenCount":6,"totalTokenCount":192},"modelVersion":"gemini-2.5-flash","responseId":"XjGwaaPEI_H3nsEP2v-88AQ"}`,
			}
		}
		if r.URL.Query().Get("alt") == "sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range chunks {
				_, _ = io.WriteString(w, "data: "+c+"\r\n\r\n")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		if len(chunks) == 2 {
			// The answer whole, as generateContent gives it.
			chunks = []string{strings.Replace(chunks[1], `" = 5"`, `"2 + 3 = 5"`, 1)}
		}
		_, _ = io.WriteString(w, chunks[0])
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *w1Server) body(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

func newCalculator(t *testing.T, base string) *agent.Agent[string] {
	t.Helper()
	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-flash", APIKey: "test-key", BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	return agent.Must(agent.New("calculator", m, &agent.Options{
		Instructions: "Use the add tool.",
		Tools:        []tool.Tool{addTool()},
	}))
}

// W1: an agent with an add tool asked to add 2 and 3, through agent.Run.
func TestAgentRun(t *testing.T) {
	ctx := t.Context()
	srv := newW1Server(t)
	rt := newRuntime(t)
	calc := newCalculator(t, srv.URL)
	if err := calc.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := calc.Run(ctx, rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "2 + 3 = 5" {
		t.Errorf("output %q", out.Output)
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "add" || out.ToolCalls[0].Arguments != `{"a":2,"b":3}` || out.ToolCalls[0].Result.Text() != "5" {
		t.Errorf("tool calls %+v; want one add {a:2, b:3} = 5", out.ToolCalls)
	}
	wantUsage := model.Usage{Requests: 2, InputTokens: 155 + 186, OutputTokens: 18 + 50 + 6, ReasoningTokens: 50, TotalTokens: 223 + 192}
	if diff := cmp.Diff(wantUsage, out.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	// gemini-2.5-flash: $0.30 per million input tokens, $2.50 per million
	// output tokens (thinking included).
	wantUSD := (float64(wantUsage.InputTokens)*0.30 + float64(wantUsage.OutputTokens)*2.50) / 1e6
	if math.Abs(out.Cost.USD-wantUSD) > 1e-12 || len(out.Cost.Unpriced) > 0 {
		t.Errorf("cost %+v; want $%g", out.Cost, wantUSD)
	}
	// The second request carries the call back with its signature, and the
	// function's response.
	var second struct {
		SystemInstruction struct {
			Parts []map[string]any `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(srv.body(1)), &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Contents) != 3 || second.SystemInstruction.Parts[0]["text"] != "Use the add tool." {
		t.Fatalf("second request %s", srv.body(1))
	}
	if got := string(second.Contents[1].Parts[0]); got != `{"thoughtSignature":"`+signature+`","functionCall":{"name":"add","args":{"a":2,"b":3}}}` {
		t.Errorf("the call sent back: %s", got)
	}
	if got := string(second.Contents[2].Parts[0]); got != `{"functionResponse":{"name":"add","response":{"result":5}}}` || second.Contents[2].Role != "user" {
		t.Errorf("the function's response: %s %s", second.Contents[2].Role, got)
	}
}

// The same run streamed: text deltas as the model writes them.
func TestAgentRunStream(t *testing.T) {
	ctx := t.Context()
	srv := newW1Server(t)
	rt := newRuntime(t)
	calc := newCalculator(t, srv.URL)
	if err := calc.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	var deltas []string
	var calls []string
	var output string
	for ev, err := range calc.RunStream(ctx, rt, "add 2 and 3", nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventDelta:
			if ev.Delta.Text != "" {
				deltas = append(deltas, ev.Delta.Text)
			}
		case agent.EventToolCall:
			calls = append(calls, ev.ToolCall.ToolName)
		case agent.EventOutput:
			output = string(ev.Output.Content)
		}
	}
	if diff := cmp.Diff([]string{"2 + 3", " = 5"}, deltas); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
	if len(calls) != 1 || calls[0] != "add" || output != `"2 + 3 = 5"` {
		t.Errorf("tool calls %v, output %s", calls, output)
	}
}

// agent.New and AddTool refuse a tool, or an output type, whose schema
// Gemini's dialect cannot express, naming the keyword.
func TestAgentRefusesInexpressibleSchemas(t *testing.T) {
	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-flash", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	labels := tool.NewRaw(model.ToolDefinition{Name: "label", Parameters: json.RawMessage(
		`{"type":"object","properties":{"labels":{"type":"object","patternProperties":{"^[a-z]+$":{"type":"string"}}}}}`)},
		func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil })
	_, err = agent.New("labeller", m, &agent.Options{Tools: []tool.Tool{labels}})
	if !errors.Is(err, agent.ErrInvalidAgent) || !errors.Is(err, gemini.ErrUnsupportedSchema) ||
		!strings.Contains(err.Error(), "label") || !strings.Contains(err.Error(), "/properties/labels/patternProperties") {
		t.Errorf("agent.New: %v; want ErrInvalidAgent naming the tool and the keyword", err)
	}
	a := agent.Must(agent.New("later", m, &agent.Options{Tools: []tool.Tool{addTool()}}))
	if err := a.AddTool(labels); !errors.Is(err, agent.ErrInvalidAgent) || !errors.Is(err, gemini.ErrUnsupportedSchema) {
		t.Errorf("AddTool: %v; want ErrInvalidAgent", err)
	}
	_, err = agent.NewTyped[map[string]int]("counts", m, nil)
	if !errors.Is(err, agent.ErrInvalidAgent) || !strings.Contains(err.Error(), "additionalProperties") {
		t.Errorf("an output type Gemini cannot describe: %v; want ErrInvalidAgent", err)
	}
	type answer struct {
		Sum  int    `json:"sum"`
		Note string `json:"note,omitempty"`
	}
	if _, err := agent.NewTyped[answer]("typed", m, &agent.Options{Tools: []tool.Tool{addTool()}}); err != nil {
		t.Errorf("an output type Gemini can describe: %v", err)
	}
}
