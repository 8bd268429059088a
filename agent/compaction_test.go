package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// longSession stores a session of turns user/assistant exchanges, each
// message some 30 tokens.
func longSession(t *testing.T, e *env, id string, turns int) {
	t.Helper()
	s := &session.Session{ID: id}
	for i := range turns {
		s.Messages = append(s.Messages,
			model.UserMessage(fmt.Sprintf("Question %d: what do we know about the topic so far? Please be thorough.", i)),
			model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart(fmt.Sprintf("Answer %d: we know a great deal about the topic, and here is some of it.", i))}})
	}
	if err := session.Save(t.Context(), e.rt.Store(), s); err != nil {
		t.Fatal(err)
	}
}

// requestTokens estimates a model request's messages as the agent does.
func requestTokens(req *model.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += compaction.EstimateTokens(m)
	}
	return n
}

// A 200-turn session is compacted with an event before the model call:
// the model's request stays under the threshold, the session keeps every
// message, and the session's next run starts from the compacted context.
func TestCompactionOfALongSession(t *testing.T) {
	e := newEnv(t, nil)
	longSession(t, e, "long", 200)
	var summaries atomic.Int64
	var summarized atomic.Value
	summarizer := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		summaries.Add(1)
		summarized.Store(req.Messages[len(req.Messages)-1].Text())
		return &model.Response{Message: model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("We discussed the topic at length over 200 questions.")}},
			Usage: model.Usage{Requests: 1, InputTokens: 12000, OutputTokens: 20}}, nil
	})
	var mu sync.Mutex
	var sizes []int
	var firstSeen string
	a := serve(t, e, agent.Must(agent.New("historian", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		sizes = append(sizes, requestTokens(req))
		if firstSeen == "" {
			firstSeen = req.Messages[1].Text()
		}
		mu.Unlock()
		return modeltest.Text("noted"), nil
	}), &agent.Options{
		Instructions: "You keep the history.",
		Compaction:   &compaction.Config{Threshold: 2000, KeepRecent: 4, Compactor: compaction.Summarize(summarizer, "")},
	})))

	var compacted []*agent.ContextCompactedEvent
	var kinds []string
	var usage model.Usage
	for ev, err := range a.RunStream(runCtx(t), e.rt, "and now?", &agent.RunOptions{SessionID: "long", RunID: "c1"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventDelta {
			continue
		}
		kinds = append(kinds, string(ev.Kind))
		switch ev.Kind {
		case agent.EventContextCompacted:
			compacted = append(compacted, ev.Compacted)
			if ev.Message.ID != "c1.context_compacted.1" {
				t.Errorf("event id %s", ev.Message.ID)
			}
		case agent.EventOutput:
			usage = ev.Output.Usage
		}
	}
	if got := strings.Join(kinds, " "); got != "input inference context_compacted output" {
		t.Errorf("stream: %s", got)
	}
	if len(compacted) != 1 {
		t.Fatalf("compaction events: %+v", compacted)
	}
	c := compacted[0]
	if c.Step != 1 || c.From <= 2000 || c.To > 2000 || c.Replaced != 397 || c.Messages != 1 {
		t.Errorf("compaction event %+v: want step 1, from over 2000 to at most 2000, 397 messages replaced by 1", c)
	}
	mu.Lock()
	if len(sizes) != 1 || sizes[0] > 2000 || !strings.HasPrefix(firstSeen, "[A summary of the earlier conversation]\nWe discussed") {
		t.Errorf("the model saw requests of %v tokens, starting with %q", sizes, firstSeen)
	}
	mu.Unlock()
	if s, _ := summarized.Load().(string); !strings.Contains(s, "[user] Question 0:") || !strings.Contains(s, "[assistant] Answer 197:") || strings.Contains(s, "Answer 198:") {
		t.Errorf("the summarizer did not get the older messages only:\n%.300s", s)
	}
	if usage.Requests != 2 || usage.InputTokens < 12000 {
		t.Errorf("the run's usage %+v does not count the summary", usage)
	}
	s, err := session.Load(t.Context(), e.rt.Store(), "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 402 || s.Messages[0].Text() != "Question 0: what do we know about the topic so far? Please be thorough." || s.Compacted == nil || s.Compacted.Upto != 397 {
		t.Fatalf("session: %d messages, first %q, compacted %+v", len(s.Messages), s.Messages[0].Text(), s.Compacted)
	}

	// The next run starts from the compacted context: no new summary.
	out, err := a.Run(runCtx(t), e.rt, "anything else?", &agent.RunOptions{SessionID: "long"})
	if err != nil || out.Output != "noted" {
		t.Fatal(out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if summaries.Load() != 1 || len(sizes) != 2 || sizes[1] > 2000 {
		t.Errorf("second run: %d summaries, request sizes %v", summaries.Load(), sizes)
	}
}

// DropToolResults keeps the calls and drops the older results' content,
// and the run's records keep every result.
func TestCompactionDropsToolResults(t *testing.T) {
	e := newEnv(t, nil)
	big := strings.Repeat("lorem ipsum ", 200) // some 600 tokens
	fetch := tool.Must(tool.New("fetch", "Fetch a page.", func(_ context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		return fmt.Sprintf("page %d: %s", in.N, big), nil
	}))
	var mu sync.Mutex
	var seen [][]string
	a := serve(t, e, agent.Must(agent.New("reader", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var results []string
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				results = append(results, m.Text()[:min(len(m.Text()), 10)])
			}
		}
		mu.Lock()
		seen = append(seen, results)
		mu.Unlock()
		if n := len(results); n < 4 {
			return modeltest.ToolCalls(modeltest.Call(fmt.Sprint("f", n), "fetch", fmt.Sprintf(`{"n":%d}`, n))), nil
		}
		return modeltest.Text("read them all"), nil
	}), &agent.Options{
		Tools:      []tool.Tool{fetch},
		Compaction: &compaction.Config{Threshold: 1500, KeepRecent: 2},
	})))
	out, err := a.Run(runCtx(t), e.rt, "read four pages", nil)
	if err != nil || out.Output != "read them all" {
		t.Fatal(out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := seen[len(seen)-1]
	if len(last) != 4 || last[0] != "[this tool" || last[1] != "[this tool" || last[3] != "page 3: lo" {
		t.Errorf("the last request's tool results: %q", last)
	}
	if len(out.ToolCalls) != 4 || !strings.HasPrefix(out.ToolCalls[0].Result.Text(), "page 0: lorem") {
		t.Errorf("the run's records lost a result: %+v", out.ToolCalls)
	}
}

// A pre_compact hook that denies keeps the whole context; its decision
// is an event. A compactor that fails leaves the context whole, and the
// run goes on.
func TestCompactionDeniedOrFailing(t *testing.T) {
	for _, tt := range []struct {
		name      string
		hooks     []agent.Hook
		compactor compaction.Compactor
		hookEvent string
	}{
		{"denied", []agent.Hook{hook("keep-all", agent.HookPreCompact, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			if in.Tokens <= 1000 {
				return agent.HookDecision{Action: agent.HookAllow}, nil // the threshold was passed: never here
			}
			return agent.HookDecision{Action: agent.HookDeny, Reason: "audit needs the whole context"}, nil
		})}, nil, "keep-all:deny"},
		{"transform refused", []agent.Hook{hook("odd", agent.HookPreCompact, "", decide(agent.HookDecision{Action: agent.HookTransform, Prompt: "x"}))}, nil, "odd:deny"},
		{"compactor fails", nil, compaction.Func(func(context.Context, *compaction.Input) (*compaction.Result, error) {
			return nil, errors.New("summarizer down")
		}), ""},
		{"compactor breaks the conversation", nil, compaction.Func(func(context.Context, *compaction.Input) (*compaction.Result, error) {
			return &compaction.Result{Messages: []model.Message{{Role: model.RoleTool, ToolCallID: "x", Parts: []model.Part{model.TextPart("?")}}}}, nil
		}), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			longSession(t, e, "s", 50)
			var sizes []int
			var mu sync.Mutex
			a := serve(t, e, agent.Must(agent.New("keeper", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
				mu.Lock()
				sizes = append(sizes, len(req.Messages))
				mu.Unlock()
				return modeltest.Text("ok"), nil
			}), &agent.Options{Hooks: tt.hooks, Compaction: &compaction.Config{Threshold: 1000, Compactor: tt.compactor}})))
			var kinds []string
			var decisions string
			for ev, err := range a.RunStream(runCtx(t), e.rt, "go on", &agent.RunOptions{SessionID: "s"}) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev.Kind {
				case agent.EventContextCompacted:
					kinds = append(kinds, "compacted")
				case agent.EventHook:
					decisions = actions(ev.Hook.Decisions)
					if ev.Hook.Event != agent.HookPreCompact || ev.Hook.Step != 1 {
						t.Errorf("hook event %+v", ev.Hook)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(kinds) != 0 || len(sizes) != 1 || sizes[0] != 101 || decisions != tt.hookEvent {
				t.Errorf("events %v, hook decisions %q; the model saw %v messages", kinds, decisions, sizes)
			}
		})
	}
}

func TestInvalidCompaction(t *testing.T) {
	m := modeltest.NewTestModel(modeltest.Text("x"))
	for _, c := range []*compaction.Config{{}, {Threshold: -1}, {Threshold: 10, KeepRecent: -1}} {
		if _, err := agent.New("a", m, &agent.Options{Compaction: c}); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("compaction %+v: %v", c, err)
		}
	}
}

// The compacted context survives in the run's state: a stored run shows
// what the model saw in place of which messages.
func TestCompactedContextIsStored(t *testing.T) {
	e := newEnv(t, nil)
	longSession(t, e, "s", 30)
	a := serve(t, e, agent.Must(agent.New("keeper", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("ok"), nil
	}), &agent.Options{Compaction: &compaction.Config{Threshold: 500, KeepRecent: 3, Compactor: compaction.Func(func(_ context.Context, in *compaction.Input) (*compaction.Result, error) {
		if in.Target <= 0 || in.Target >= 250 || in.Tokens <= 500 || in.Threshold != 500 {
			return nil, fmt.Errorf("input %d tokens, target %d, threshold %d", in.Tokens, in.Target, in.Threshold)
		}
		return &compaction.Result{Messages: []model.Message{model.UserMessage(fmt.Sprintf("(%d messages elided)", len(in.Messages)))}}, nil
	})}})))
	if _, err := a.Run(runCtx(t), e.rt, "go on", &agent.RunOptions{SessionID: "s", RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	st, err := e.rt.LoadState(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(st.Compacted)
	if st.Compacted == nil || st.Compacted.Upto != 58 || st.Compacted.Messages[0].Text() != "(58 messages elided)" || len(st.Messages) != 62 {
		t.Errorf("stored compaction %s; %d messages", data, len(st.Messages))
	}
}

// The input size the model reported counts when it is more than the
// estimate: a small conversation that the model says is large is
// compacted.
func TestCompactionTrustsReportedInputSize(t *testing.T) {
	e := newEnv(t, nil)
	echo := tool.Must(tool.New("echo", "Echo.", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		return in.S, nil
	}))
	var step atomic.Int64
	a := serve(t, e, agent.Must(agent.New("reported", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		if step.Add(1) == 1 {
			r := modeltest.ToolCalls(modeltest.Call("e1", "echo", `{"s":"hi"}`))
			r.Usage = model.Usage{Requests: 1, InputTokens: 5000}
			return r, nil
		}
		return modeltest.Text("done"), nil
	}), &agent.Options{Tools: []tool.Tool{echo}, Compaction: &compaction.Config{Threshold: 1000, KeepRecent: 1}})))
	var compacted []*agent.ContextCompactedEvent
	for ev, err := range a.RunStream(runCtx(t), e.rt, "echo hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventContextCompacted {
			compacted = append(compacted, ev.Compacted)
		}
	}
	if len(compacted) != 1 || compacted[0].Step != 2 || compacted[0].From < 5000 || compacted[0].To > 1000 {
		t.Errorf("compactions %+v: want one at step 2, from the 5000 tokens reported", compacted)
	}
}
