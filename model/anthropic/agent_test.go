package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/anthropic"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// The W1 conversation as the API holds it: a tool call, with thinking
// and a cache write, then the answer, read from the cache.
var (
	w1Signature = "EtwCCkYICxgCKkCEz+rKTIOYZe9QecQgik+7E+vvKt4yO1gnBuWc27qeE01iRBUIVDCuDDcS9/A=="
	w1Call      = reply{ID: "msg_w1a", Model: "claude-haiku-4-5-20251001", Stop: "tool_use",
		Blocks: []apiBlock{
			thinkingBlock("The user wants 2 + 3; the add tool does that.", w1Signature),
			toolUse("toolu_01add", "add", `{"a":2,"b":3}`),
		},
		Usage: map[string]int64{"input_tokens": 400, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0, "output_tokens": 20}}
	w1Answer = reply{ID: "msg_w1b", Model: "claude-haiku-4-5-20251001", Stop: "end_turn",
		Blocks: []apiBlock{textBlock("2 + 3 = 5.")},
		Usage:  map[string]int64{"input_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1000, "output_tokens": 10}}
)

// w1Fake answers with the tool call, and with the answer once the request
// carries the tool's result.
func w1Fake(t *testing.T) *fakeAPI {
	call, answer := answerWith(w1Call), answerWith(w1Answer)
	return newFake(t, func(n int, body []byte, w http.ResponseWriter) {
		if bytes.Contains(body, []byte(`"tool_result"`)) {
			answer(n, body, w)
			return
		}
		call(n, body, w)
	})
}

// w1Agent serves an agent with an add tool, calling m, on a runtime of
// an in-process broker and an in-memory store.
func w1Agent(t *testing.T, m model.Model) (*agent.Agent[string], *agent.Runtime) {
	t.Helper()
	b, st := memory.New(nil), storemem.New()
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	rt := agent.NewRuntime(c, st, nil)
	type operands struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add, err := tool.New("add", "Adds two integers.", func(_ context.Context, in operands) (int, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New("adder", m, &agent.Options{
		Instructions: "Use the add tool for sums.",
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

// checkSecondRequest checks that the request after the tool call carries
// the system prompt, the thinking block with its signature, the call and
// its result.
func checkSecondRequest(t *testing.T, body []byte) {
	t.Helper()
	var req struct {
		System   []struct{ Text string }
		Thinking *struct {
			BudgetTokens int `json:"budget_tokens"`
		}
		Messages []struct {
			Role    string
			Content []struct {
				Type, Signature, ID string
				Input               json.RawMessage
				ToolUseID           string `json:"tool_use_id"`
				Content             any
			}
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.System) != 1 || req.System[0].Text != "Use the add tool for sums." || req.Thinking == nil || len(req.Messages) != 3 {
		t.Fatalf("second request: %s", body)
	}
	asst, results := req.Messages[1], req.Messages[2]
	if asst.Role != "assistant" || len(asst.Content) != 2 ||
		asst.Content[0].Type != "thinking" || asst.Content[0].Signature != w1Signature ||
		asst.Content[1].Type != "tool_use" || asst.Content[1].ID != "toolu_01add" || string(asst.Content[1].Input) != `{"a":2,"b":3}` {
		t.Errorf("assistant turn sent back: %+v", asst)
	}
	if results.Role != "user" || len(results.Content) != 1 || results.Content[0].Type != "tool_result" ||
		results.Content[0].ToolUseID != "toolu_01add" || results.Content[0].Content != "5" {
		t.Errorf("tool result turn: %+v", results)
	}
}

// A W1 run: "add 2 and 3" through agent.Run, the model a fake Messages
// API; the thinking of the first response goes back, through the run's
// stored state, with the tool's result.
func TestAgentRun(t *testing.T) {
	f := w1Fake(t)
	a, rt := w1Agent(t, f.model(t, anthropic.Options{ThinkingBudget: 1024}))
	out, err := a.Run(t.Context(), rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "2 + 3 = 5." || out.Steps != 2 {
		t.Errorf("output %q after %d model calls", out.Output, out.Steps)
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "add" || out.ToolCalls[0].Arguments != `{"a":2,"b":3}` ||
		out.ToolCalls[0].Result == nil || out.ToolCalls[0].Result.Text() != "5" {
		t.Errorf("tool calls: %+v", out.ToolCalls)
	}
	wantUsage := model.Usage{Requests: 2, InputTokens: 1400 + 1030, CachedInputTokens: 1000, CacheWriteInputTokens: 1000,
		OutputTokens: 30, TotalTokens: 2460}
	if diff := cmp.Diff(wantUsage, out.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	// claude-haiku-4-5 per million tokens: $1 input, $0.10 cache read,
	// $1.25 cache write, $5 output.
	wantCost := (400*1 + 1000*1.25 + 20*5 + 30*1 + 1000*0.10 + 10*5) / 1e6
	if math.Abs(out.Cost.USD-wantCost) > 1e-12 || len(out.Cost.Unpriced) != 0 {
		t.Errorf("cost %+v; want $%g", out.Cost, wantCost)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	checkSecondRequest(t, reqs[1])
	if bytes.Contains(reqs[0], []byte(`"stream"`)) {
		t.Error("agent.Run streamed")
	}
}

// The same run through agent.RunStream: text deltas as the API streams
// them.
func TestAgentRunStream(t *testing.T) {
	f := w1Fake(t)
	a, rt := w1Agent(t, f.model(t, anthropic.Options{ThinkingBudget: 1024}))
	var text, thinking []string
	var output *agent.OutputEvent
	for ev, err := range a.RunStream(t.Context(), rt, "add 2 and 3", nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventDelta:
			if ev.Delta.Text != "" {
				text = append(text, ev.Delta.Text)
			}
			if ev.Delta.Thinking != "" {
				thinking = append(thinking, ev.Delta.Thinking)
			}
		case agent.EventOutput:
			output = ev.Output
		}
	}
	if len(text) < 2 || strings.Join(text, "") != "2 + 3 = 5." {
		t.Errorf("text deltas %q", text)
	}
	if strings.Join(thinking, "") != "The user wants 2 + 3; the add tool does that." {
		t.Errorf("thinking deltas %q", thinking)
	}
	if output == nil || output.Usage.Requests != 2 || output.Usage.CachedInputTokens != 1000 || output.Cost.USD <= 0 {
		t.Errorf("output event %+v", output)
	}
	reqs := f.requests()
	if len(reqs) != 2 || !bytes.Contains(reqs[0], []byte(`"stream":true`)) {
		t.Fatalf("%d requests; first %s", len(reqs), reqs[0])
	}
	checkSecondRequest(t, reqs[1])
}
