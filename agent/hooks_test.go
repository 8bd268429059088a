package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/commandhook"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// hookedW1 serves W1 with hooks: the model calls add(2, 3) and then answers
// with what the call's result says. It returns the agent, the number of
// times add ran, and the arguments it last ran with.
func hookedW1(t *testing.T, e *env, hooks ...agent.Hook) (*agent.Agent[string], *atomic.Int64, *atomic.Value) {
	t.Helper()
	var runs atomic.Int64
	var lastArgs atomic.Value
	add, err := tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		runs.Add(1)
		lastArgs.Store(in)
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	a, err := agent.New("calculator", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			if last.IsError {
				return modeltest.Text("error: " + last.Text()), nil
			}
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	}), &agent.Options{Tools: []tool.Tool{add}, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, e, a), &runs, &lastArgs
}

func hook(name string, event agent.HookEvent, matcher string, fn func(context.Context, agent.HookInput) (agent.HookDecision, error)) agent.Hook {
	return agent.Hook{Name: name, Event: event, Matcher: matcher, Func: fn}
}

func decide(d agent.HookDecision) func(context.Context, agent.HookInput) (agent.HookDecision, error) {
	return func(context.Context, agent.HookInput) (agent.HookDecision, error) { return d, nil }
}

func actions(recs []agent.HookRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.Hook+":"+string(r.Action))
	}
	return strings.Join(s, ",")
}

func TestHooks(t *testing.T) {
	var seen atomic.Value
	// hang holds a hook that ignores its context until the test ends.
	hang := make(chan struct{})
	defer close(hang)
	for _, tt := range []struct {
		name     string
		hooks    []agent.Hook
		output   string
		runs     int64
		recorded string
		status   string
	}{
		{"allow", []agent.Hook{hook("audit", agent.HookPreToolUse, "*", decide(agent.HookDecision{Action: agent.HookAllow}))},
			"The sum is 5", 1, "audit:allow", agent.StatusSuccess},
		{"deny", []agent.Hook{hook("policy", agent.HookPreToolUse, "add", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "no arithmetic today"}))},
			"error: the call was denied by policy: no arithmetic today", 0, "policy:deny", agent.StatusError},
		{"transform arguments", []agent.Hook{hook("double", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"a":20,"b":30}`)}))},
			"The sum is 50", 1, "double:transform", agent.StatusSuccess},
		{"transforms chain", []agent.Hook{
			hook("first", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"a":1,"b":1}`)})),
			hook("second", agent.HookPreToolUse, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
				seen.Store(string(in.Arguments))
				return agent.HookDecision{Action: agent.HookAllow}, nil
			}),
		}, "The sum is 2", 1, "first:transform,second:allow", agent.StatusSuccess},
		{"skip stops the later hooks", []agent.Hook{
			hook("trusted", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookSkip})),
			hook("policy", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "never reached"})),
		}, "The sum is 5", 1, "trusted:skip", agent.StatusSuccess},
		{"matcher", []agent.Hook{hook("web", agent.HookPreToolUse, "web_*|bash", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "no"}))},
			"The sum is 5", 1, "", agent.StatusSuccess},
		{"post transform", []agent.Hook{hook("redact", agent.HookPostToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Result: tool.TextResult("[redacted]")}))},
			"The sum is [redacted]", 1, "redact:transform", agent.StatusSuccess},
		{"post deny", []agent.Hook{hook("dlp", agent.HookPostToolUse, "", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "it holds a secret"}))},
			"error: the result was withheld by dlp: it holds a secret", 1, "dlp:deny", agent.StatusError},
		{"pre and post", []agent.Hook{
			hook("post", agent.HookPostToolUse, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
				return agent.HookDecision{Action: agent.HookTransform, Result: tool.TextResult(in.Result.Text() + " (checked)")}, nil
			}),
			hook("pre", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookAllow})),
		}, "The sum is 5 (checked)", 1, "pre:allow,post:transform", agent.StatusSuccess},
		{"error denies", []agent.Hook{hook("broken", agent.HookPreToolUse, "", func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{}, errors.New("policy store down")
		})}, "error: the hook broken failed: policy store down", 0, "broken:deny", agent.StatusError},
		{"panic denies", []agent.Hook{hook("crashy", agent.HookPreToolUse, "", func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			panic("oops")
		})}, "error: the hook crashy failed: panicked: oops", 0, "crashy:deny", agent.StatusError},
		{"timeout denies", []agent.Hook{{Name: "slow", Event: agent.HookPreToolUse, Timeout: 50 * time.Millisecond,
			Func: func(context.Context, agent.HookInput) (agent.HookDecision, error) {
				<-hang
				return agent.HookDecision{Action: agent.HookAllow}, nil
			}}}, "error: the hook slow failed: did not answer within 50ms", 0, "slow:deny", agent.StatusError},
		{"bad transform denies", []agent.Hook{hook("sloppy", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`[1]`)}))},
			"error: the hook sloppy failed: a transform of the arguments must give them as a JSON object", 0, "sloppy:deny", agent.StatusError},
		{"unknown action denies", []agent.Hook{hook("odd", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: "maybe"}))},
			`error: the hook odd failed: unknown action "maybe"`, 0, "odd:deny", agent.StatusError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, runs, _ := hookedW1(t, e, tt.hooks...)
			out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.Output, tt.output) {
				t.Errorf("output %q, want it to start with %q", out.Output, tt.output)
			}
			if n := runs.Load(); n != tt.runs {
				t.Errorf("the tool ran %d times, want %d", n, tt.runs)
			}
			if len(out.ToolCalls) != 1 {
				t.Fatalf("tool calls %+v", out.ToolCalls)
			}
			if got := actions(out.ToolCalls[0].Hooks); got != tt.recorded {
				t.Errorf("recorded hooks %q, want %q", got, tt.recorded)
			}
			if out.ToolCalls[0].Status != tt.status {
				t.Errorf("status %s, want %s", out.ToolCalls[0].Status, tt.status)
			}
		})
	}
	if got := seen.Load(); got != `{"a":1,"b":1}` {
		t.Errorf("the second hook saw %v, want the first one's arguments", got)
	}
}

// The hooks' decisions reach the stream with the call's result, and a
// transform's arguments are recorded.
func TestHookDecisionsInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := hookedW1(t, e, hook("double", agent.HookPreToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"a":4,"b":4}`)})))
	var result *agent.ToolResultEvent
	for ev, err := range a.RunStream(runCtx(t), e.rt, "add", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventToolResult {
			result = ev.ToolResult
		}
	}
	if result == nil || len(result.Hooks) != 1 {
		t.Fatalf("tool result in the stream: %+v", result)
	}
	if h := result.Hooks[0]; h.Hook != "double" || h.Action != agent.HookTransform || string(h.Arguments) != `{"a":4,"b":4}` || result.Result.Text() != "8" {
		t.Errorf("recorded %+v, result %q", h, result.Result.Text())
	}
}

// Every hook event's decisions are an event of their own, in the run's
// order: each before what it decided takes effect.
func TestHookEventsInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := hookedW1(t, e,
		hook("prompt", agent.HookUserPromptSubmit, "", decide(agent.HookDecision{Action: agent.HookAllow})),
		hook("session", agent.HookSessionStart, "", decide(agent.HookDecision{Action: agent.HookAllow})),
		hook("double", agent.HookPreToolUse, "add", decide(agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"a":4,"b":4}`)})),
		hook("not-me", agent.HookPreToolUse, "other", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "never"})),
		hook("redact", agent.HookPostToolUse, "", decide(agent.HookDecision{Action: agent.HookTransform, Result: tool.TextResult("[redacted]")})),
		hook("audit", agent.HookStop, "", decide(agent.HookDecision{Action: agent.HookAllow})),
		hook("bye", agent.HookSessionEnd, "", decide(agent.HookDecision{Action: agent.HookSkip})),
	)
	var got []string
	for ev, err := range a.RunStream(runCtx(t), e.rt, "add", &agent.RunOptions{RunID: "hs", SessionID: "s-hs"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventDelta:
			continue
		case agent.EventHook:
			h := ev.Hook
			if ev.RunID != "hs" || ev.Message.ID != "hs.hook."+string(h.Event)+map[bool]string{true: ".1.call_1", false: ""}[h.ToolCallID != ""] {
				t.Errorf("hook event of run %s, id %s: %+v", ev.RunID, ev.Message.ID, h)
			}
			got = append(got, "hook:"+string(h.Event)+"="+actions(h.Decisions))
		case agent.EventOutput:
			var s string
			_ = json.Unmarshal(ev.Output.Content, &s)
			got = append(got, "output:"+s)
		default:
			got = append(got, string(ev.Kind))
		}
	}
	want := "input hook:user_prompt_submit=prompt:allow hook:session_start=session:allow inference tool_call " +
		"hook:pre_tool_use=double:transform hook:post_tool_use=redact:transform tool_result inference " +
		"hook:stop=audit:allow hook:session_end=bye:skip output:The sum is [redacted]"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("stream:\n got %s\nwant %s", s, want)
	}
	// An agent without hooks publishes no hook event.
	plain := serve(t, e, agent.Must(agent.New("plain", modeltest.NewTestModel(modeltest.Text("hi")), nil)))
	for ev, err := range plain.RunStream(runCtx(t), e.rt, "x", nil) {
		if err != nil || ev.Kind == agent.EventHook {
			t.Fatalf("plain agent: %+v, %v", ev, err)
		}
	}
}

// session_start hooks are told whether the session is new, and may refuse
// the run or change its prompt; session_end hooks are told each run of a
// session ended, after its messages were added to the session.
func TestSessionHooks(t *testing.T) {
	e := newEnv(t, nil)
	var starts, ends []string
	var mu sync.Mutex
	var seen atomic.Value
	var calls atomic.Int64
	hooks := []agent.Hook{
		hook("start", agent.HookSessionStart, "assistant", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			mu.Lock()
			starts = append(starts, in.SessionID+":"+in.Source)
			mu.Unlock()
			if in.SessionID == "closed" {
				return agent.HookDecision{Action: agent.HookDeny, Reason: "this session is closed"}, nil
			}
			if in.Source == "startup" {
				return agent.HookDecision{Action: agent.HookTransform, Prompt: "(new conversation) " + in.Prompt}, nil
			}
			return agent.HookDecision{Action: agent.HookAllow}, nil
		}),
		hook("end", agent.HookSessionEnd, "", func(ctx context.Context, in agent.HookInput) (agent.HookDecision, error) {
			s, err := session.Load(ctx, e.rt.Store(), in.SessionID)
			n := 0
			if err == nil {
				n = len(s.Messages)
			}
			mu.Lock()
			ends = append(ends, fmt.Sprintf("%s:%s:%s:%d", in.SessionID, in.Status, in.Output, n))
			mu.Unlock()
			return agent.HookDecision{Action: agent.HookDeny, Reason: "ignored"}, nil
		}),
	}
	a := serve(t, e, agent.Must(agent.New("assistant", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen.Store(req.Messages[len(req.Messages)-1].Text())
		return modeltest.Text(fmt.Sprint("answer ", len(req.Messages))), nil
	}), &agent.Options{Hooks: hooks})))
	for i, want := range []string{"(new conversation) hello", "again"} {
		out, err := a.Run(runCtx(t), e.rt, []string{"hello", "again"}[i], &agent.RunOptions{SessionID: "s1"})
		if err != nil || seen.Load() != want {
			t.Fatalf("run %d in the session: %+v, %v; the model saw %v", i, out, err, seen.Load())
		}
	}
	_, err := a.Run(runCtx(t), e.rt, "hello", &agent.RunOptions{SessionID: "closed"})
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "the prompt was refused by start: this session is closed") || calls.Load() != 2 {
		t.Fatalf("refused session: %v; %d model calls", err, calls.Load())
	}
	// A run in no session starts and ends none.
	if _, err := a.Run(runCtx(t), e.rt, "hi", nil); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(starts, " "); got != "s1:startup s1:resume closed:startup" {
		t.Errorf("session_start hooks: %s", got)
	}
	if got := strings.Join(ends, " "); got != "s1:complete:answer 1:2 s1:complete:answer 3:4 closed:failed::0" {
		t.Errorf("session_end hooks: %s", got)
	}
}

// subagent_stop hooks see a subagent's output before it becomes the
// result of the call that started it: deny, transform and skip each change
// what the parent's model sees.
func TestSubagentStopHook(t *testing.T) {
	e := newEnv(t, nil)
	serve(t, e, agent.Must(agent.New("researcher", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("the answer is 42, password hunter2"), nil
	}), nil)))
	var told atomic.Value
	for _, tt := range []struct {
		name  string
		hooks []agent.Hook
		want  string
	}{
		{"allow", []agent.Hook{hook("audit", agent.HookSubagentStop, "researcher", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			told.Store(fmt.Sprintf("%s %s %s %s %q", in.Subagent, in.SubagentRunID, in.Status, in.ToolName, in.Output))
			return agent.HookDecision{Action: agent.HookAllow}, nil
		})}, "got: the answer is 42, password hunter2"},
		{"deny", []agent.Hook{hook("dlp", agent.HookSubagentStop, "", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "it holds a secret"}))},
			"got: the result was withheld by dlp: it holds a secret"},
		{"transform", []agent.Hook{
			hook("redact", agent.HookSubagentStop, "research*", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
				return agent.HookDecision{Action: agent.HookTransform, Result: tool.TextResult(strings.ReplaceAll(in.Result.Text(), "hunter2", "***"))}, nil
			}),
			hook("shout", agent.HookSubagentStop, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
				return agent.HookDecision{Action: agent.HookTransform, Result: tool.TextResult(strings.ToUpper(in.Result.Text()))}, nil
			}),
		}, "got: THE ANSWER IS 42, PASSWORD ***"},
		{"skip", []agent.Hook{
			hook("trusted", agent.HookSubagentStop, "", decide(agent.HookDecision{Action: agent.HookSkip})),
			hook("dlp", agent.HookSubagentStop, "", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "it holds a secret"})),
		}, "got: the answer is 42, password hunter2"},
		{"other subagent", []agent.Hook{hook("dlp", agent.HookSubagentStop, "writer", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "never"}))},
			"got: the answer is 42, password hunter2"},
		{"failing", []agent.Hook{hook("broken", agent.HookSubagentStop, "", func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{}, errors.New("no policy")
		})}, "got: the hook broken failed: no policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lead := serve(t, e, agent.Must(agent.New("lead-"+strings.ReplaceAll(tt.name, " ", "-"), modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
				last := req.Messages[len(req.Messages)-1]
				if last.Role == model.RoleTool {
					return modeltest.Text("got: " + last.Text()), nil
				}
				return modeltest.ToolCalls(modeltest.Call("s1", "researcher", `{"input":"what is the answer?"}`)), nil
			}), &agent.Options{
				Tools: []tool.Tool{tool.Must(agent.AsTool(agent.Named("researcher", ""), nil))},
				Hooks: tt.hooks,
			})))
			var hookEvent *agent.HookDecisionEvent
			var out string
			for ev, err := range lead.RunStream(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "r-" + tt.name}) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev.Kind {
				case agent.EventHook:
					hookEvent = ev.Hook
				case agent.EventOutput:
					_ = json.Unmarshal(ev.Output.Content, &out)
				}
			}
			if out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
			if n := len(tt.hooks); tt.name != "other subagent" && (hookEvent == nil || hookEvent.Event != agent.HookSubagentStop || hookEvent.Subagent != "researcher" || hookEvent.ToolCallID != "s1" || len(hookEvent.Decisions) == 0 || len(hookEvent.Decisions) > n) {
				t.Errorf("hook event %+v", hookEvent)
			}
			if tt.name == "other subagent" && hookEvent != nil {
				t.Errorf("hook event for a hook that did not match: %+v", hookEvent)
			}
		})
	}
	if got, want := told.Load(), `researcher r-allow/s1 complete researcher "the answer is 42, password hunter2"`; got != want {
		t.Errorf("subagent_stop input: %v, want %s", got, want)
	}
}

func TestInvalidHooks(t *testing.T) {
	ok := func(context.Context, agent.HookInput) (agent.HookDecision, error) {
		return agent.HookDecision{Action: agent.HookAllow}, nil
	}
	for _, h := range []agent.Hook{
		{Event: agent.HookPreToolUse, Func: ok},
		{Name: "x", Event: "on_sunday", Func: ok},
		{Name: "x", Event: agent.HookPreToolUse},
		{Name: "x", Event: agent.HookPreToolUse, Matcher: "[", Func: ok},
	} {
		if _, err := agent.New("a", modeltest.NewTestModel(), &agent.Options{Hooks: []agent.Hook{h}}); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("hook %+v: %v", h, err)
		}
	}
}

// A command hook decides from the call it reads on its standard input; one
// that crashes, prints no decision, or outlasts its timeout denies.
func TestCommandHook(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, body, output string
		runs               int64
	}{
		{"deny by input", `grep -q '"tool_name":"add"' && echo '{"action":"deny","reason":"add is off"}'`, "error: the call was denied by cmd: add is off", 0},
		{"silent allows", `cat >/dev/null`, "The sum is 5", 1},
		{"transform", `cat >/dev/null; echo '{"action":"transform","arguments":{"a":7,"b":0}}'`, "The sum is 7", 1},
		{"crash", `echo 'cannot reach the policy server' >&2; exit 3`, "error: the hook cmd failed: ", 0},
		{"garbage", `echo 'yes please'`, "error: the hook cmd failed: ", 0},
		{"too slow", `sleep 5 & sleep 5`, "error: the hook cmd failed: did not answer within 300ms", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := commandhook.New("cmd", agent.HookPreToolUse, "", []string{script(strings.ReplaceAll(tt.name, " ", "_"), tt.body)}, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, nil)
			a, runs, _ := hookedW1(t, e, h)
			start := time.Now()
			out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.Output, tt.output) {
				t.Errorf("output %q, want it to start with %q", out.Output, tt.output)
			}
			if runs.Load() != tt.runs {
				t.Errorf("the tool ran %d times, want %d", runs.Load(), tt.runs)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("the run took %s", d)
			}
		})
	}
	if _, err := commandhook.New("x", agent.HookPreToolUse, "", nil, 0); err == nil {
		t.Error("a command hook without a command was made")
	}
}

// user_prompt_submit hooks see the prompt before the run exists: they may
// refuse it (no model call) or change it.
func TestUserPromptSubmitHook(t *testing.T) {
	e := newEnv(t, nil)
	var seen atomic.Value
	var calls atomic.Int64
	hooks := []agent.Hook{
		hook("no-secrets", agent.HookUserPromptSubmit, "assistant", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			if strings.Contains(in.Prompt, "password") {
				return agent.HookDecision{Action: agent.HookDeny, Reason: "prompts must not hold passwords"}, nil
			}
			return agent.HookDecision{Action: agent.HookAllow}, nil
		}),
		hook("polite", agent.HookUserPromptSubmit, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{Action: agent.HookTransform, Prompt: in.Prompt + ", please"}, nil
		}),
		hook("other-agent", agent.HookUserPromptSubmit, "someone_else", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "never"})),
	}
	a := serve(t, e, agent.Must(agent.New("assistant", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen.Store(req.Messages[len(req.Messages)-1].Text())
		return modeltest.Text("ok"), nil
	}), &agent.Options{Hooks: hooks})))

	out, err := a.Run(runCtx(t), e.rt, "say hi", nil)
	if err != nil || out.Output != "ok" || seen.Load() != "say hi, please" {
		t.Fatalf("allowed prompt: %+v, %v; the model saw %v", out, err, seen.Load())
	}
	_, err = a.Run(runCtx(t), e.rt, "my password is hunter2", &agent.RunOptions{RunID: "p1"})
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "the prompt was refused by no-secrets: prompts must not hold passwords") {
		t.Fatalf("refused prompt: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("model calls %d, want 1 (none for the refused prompt)", calls.Load())
	}
	st, err := e.rt.LoadState(t.Context(), "p1")
	if err != nil || st.Status != agent.RunFailed || st.Step != 1 {
		t.Errorf("refused run's state: %+v, %v", st, err)
	}
	// A transform without a prompt fails, and so refuses.
	e2 := newEnv(t, nil)
	b := serve(t, e2, agent.Must(agent.New("b", modeltest.NewTestModel(modeltest.Text("ok")), &agent.Options{
		Hooks: []agent.Hook{hook("empty", agent.HookUserPromptSubmit, "", decide(agent.HookDecision{Action: agent.HookTransform}))},
	})))
	if _, err := b.Run(runCtx(t), e2.rt, "x", nil); err == nil || !strings.Contains(err.Error(), "must give the new prompt") {
		t.Errorf("empty transform: %v", err)
	}
}

// subagent_start hooks may deny a subagent's start or change its prompt;
// stop hooks are told how each run ended.
func TestSubagentStartAndStopHooks(t *testing.T) {
	e := newEnv(t, nil)
	var childPrompt atomic.Value
	var stops sync.Map
	serve(t, e, agent.Must(agent.New("researcher", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		childPrompt.Store(req.Messages[len(req.Messages)-1].Text())
		return modeltest.Text("42"), nil
	}), nil)))
	stop := hook("audit", agent.HookStop, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
		stops.Store(in.RunID, string(in.Status)+":"+in.Output)
		return agent.HookDecision{Action: agent.HookDeny, Reason: "ignored"}, nil
	})
	lead := func(name string, start agent.Hook) *agent.Agent[string] {
		return serve(t, e, agent.Must(agent.New(name, modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role == model.RoleTool {
				return modeltest.Text("got: " + last.Text()), nil
			}
			return modeltest.ToolCalls(modeltest.Call("s1", "researcher", `{"input":"what is the answer?"}`)), nil
		}), &agent.Options{
			Tools: []tool.Tool{tool.Must(agent.AsTool(agent.Named("researcher", ""), nil))},
			Hooks: []agent.Hook{start, stop},
		})))
	}
	deny := lead("denier", hook("budget", agent.HookSubagentStart, "research*", decide(agent.HookDecision{Action: agent.HookDeny, Reason: "no budget left"})))
	out, err := deny.Run(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "d1"})
	if err != nil || out.Output != "got: the call was denied by budget: no budget left" || childPrompt.Load() != nil {
		t.Fatalf("denied start: %+v, %v; the subagent saw %v", out, err, childPrompt.Load())
	}
	change := lead("changer", hook("frame", agent.HookSubagentStart, "", func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
		return agent.HookDecision{Action: agent.HookTransform, Prompt: "Briefly: " + in.Prompt}, nil
	}))
	out, err = change.Run(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "c1"})
	if err != nil || out.Output != "got: 42" || childPrompt.Load() != "Briefly: what is the answer?" {
		t.Fatalf("changed start: %+v, %v; the subagent saw %v", out, err, childPrompt.Load())
	}
	e.settle(t)
	for run, want := range map[string]string{"d1": "complete:got: the call was denied by budget: no budget left", "c1": "complete:got: 42"} {
		if got, _ := stops.Load(run); got != want {
			t.Errorf("stop hook for %s: %v, want %q", run, got, want)
		}
	}
}
