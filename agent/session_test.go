package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

func TestSessionContinues(t *testing.T) {
	e := newEnv(t, nil)
	m := modeltest.NewTestModel(modeltest.Text("Nice to meet you, Ada."), modeltest.Text("Your name is Ada."))
	a := agent.Must(agent.New[agent.NoDeps, string]("chat", m, &agent.Options[agent.NoDeps]{Instructions: "Be brief."}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	opts := &agent.RunOptions[agent.NoDeps]{SessionID: "s1"}
	if _, err := a.Run(runCtx(t), e.rt, "I am Ada.", opts); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "What is my name?", opts)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, msg := range m.Requests()[1].Messages {
		texts = append(texts, string(msg.Role)+": "+msg.Text())
	}
	want := []string{"system: Be brief.", "user: I am Ada.", "assistant: Nice to meet you, Ada.", "user: What is my name?"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("second request (-want +got):\n%s", diff)
	}
	if len(out.Messages) != 2 {
		t.Errorf("the second run's own messages: %d, want 2", len(out.Messages))
	}
	s, err := e.rt.LoadSession(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 4 || len(s.Runs) != 2 {
		t.Errorf("session has %d messages from %d runs", len(s.Messages), len(s.Runs))
	}
	// Serialize, delete and restore the session: the conversation survives.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.DeleteSession(t.Context(), "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.LoadSession(t.Context(), "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
	restored, err := agent.DecodeSession(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.SaveSession(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	again, err := e.rt.LoadSession(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Messages, again.Messages); diff != "" {
		t.Errorf("restored session differs:\n%s", diff)
	}
}

type searchDeps struct {
	Prefix string `json:"prefix"`
}

type echoArgs struct {
	Text string `json:"text"`
}

func TestDepsReachTools(t *testing.T) {
	mk := func(t *testing.T) *agent.Agent[searchDeps, string] {
		echo, err := agent.NewTool("echo", "Echo with the prefix.", func(rc agent.RunContext[searchDeps], in echoArgs) (string, error) {
			if rc.ToolCallID != "c1" || rc.Agent != "deps" || rc.RunID == "" || rc.Step != 1 {
				return "", errors.New("run context incomplete")
			}
			return rc.Deps.Prefix + in.Text, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return agent.Must(agent.New[searchDeps, string]("deps", oneCall("echo", `{"text":"hi"}`), &agent.Options[searchDeps]{
			Tools:            []tool.Tool{echo},
			InstructionsFunc: func(rc agent.RunContext[searchDeps]) string { return "prefix is " + rc.Deps.Prefix },
		}))
	}
	t.Run("travel with the run", func(t *testing.T) {
		e := newEnv(t, nil)
		a := mk(t)
		if err := a.Serve(t.Context(), e.rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions[searchDeps]{Deps: searchDeps{Prefix: "run:"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "saw: run:hi" {
			t.Fatalf("output = %q", out.Output)
		}
	})
	t.Run("local to the worker", func(t *testing.T) {
		e := newEnv(t, nil)
		a := mk(t)
		if err := a.Serve(t.Context(), e.rt, &agent.ServeOptions[searchDeps]{LocalDeps: func() searchDeps { return searchDeps{Prefix: "local:"} }}); err != nil {
			t.Fatal(err)
		}
		out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions[searchDeps]{Deps: searchDeps{Prefix: "run:"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "saw: local:hi" {
			t.Fatalf("output = %q", out.Output)
		}
	})
}

func TestUnserializableDepsAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	a := agent.Must(agent.New[chan int, string]("chans", modeltest.NewTestModel(modeltest.Text("x")), nil))
	_, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions[chan int]{Deps: make(chan int)})
	if err == nil || !strings.Contains(err.Error(), "leave RunOptions.Deps unset") || !strings.Contains(err.Error(), "ServeOptions.LocalDeps") {
		t.Fatalf("err = %v", err)
	}
}

// localDeps holds what cannot travel as JSON.
type localDeps struct {
	Lookup func(string) string
	Events chan string
}

// A run without deps carries none, so an agent whose Deps do not encode as
// JSON runs on its workers' LocalDeps with no RunOptions, or with options
// that leave Deps unset.
func TestRunWithoutDepsCarriesNone(t *testing.T) {
	e := newEnv(t, nil)
	lookup, err := agent.NewTool("lookup", "Look a word up.", func(rc agent.RunContext[localDeps], in echoArgs) (string, error) {
		if rc.Deps.Lookup == nil {
			return "", errors.New("no local deps")
		}
		return rc.Deps.Lookup(in.Text), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := agent.Must(agent.New[localDeps, string]("local", oneCall("lookup", `{"text":"calf"}`), &agent.Options[localDeps]{Tools: []tool.Tool{lookup}}))
	if err := a.Serve(t.Context(), e.rt, &agent.ServeOptions[localDeps]{LocalDeps: func() localDeps {
		return localDeps{Lookup: strings.ToUpper, Events: make(chan string)}
	}}); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "saw: CALF" {
		t.Fatalf("output = %q", out.Output)
	}
	st, err := e.rt.LoadRun(runCtx(t), out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Deps) != 0 {
		t.Errorf("the run carried deps %s", st.Deps)
	}
}

func TestRunStream(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := newW1(t, e)
	var kinds []agent.EventKind
	var text strings.Builder
	var runID string
	for ev, err := range a.RunStream(runCtx(t), e.rt, "add 2 and 3", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		kinds = append(kinds, ev.Kind)
		if ev.Kind == agent.EventDelta {
			text.WriteString(ev.Delta.Text)
		}
		if ev.Kind == agent.EventToolCall && (ev.ToolCall.ToolName != "add" || ev.ToolCall.Arguments != `{"a":2,"b":3}`) {
			t.Errorf("tool call event = %+v", ev.ToolCall)
		}
		if ev.Kind == agent.EventToolResult && ev.ToolResult.Result.Text() != "5" {
			t.Errorf("tool result event = %+v", ev.ToolResult)
		}
	}
	// The events of the run's key come in order; a tool call travels under
	// its own key, and RunStream yields it before its result.
	var runKey []agent.EventKind
	for _, k := range kinds {
		if k != agent.EventToolCall {
			runKey = append(runKey, k)
		}
	}
	want := []agent.EventKind{"input", "inference", "tool_result", "inference", "delta", "output"}
	if diff := cmp.Diff(want, runKey); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	call, result := slices.Index(kinds, agent.EventToolCall), slices.Index(kinds, agent.EventToolResult)
	if call < 0 || call > result {
		t.Errorf("tool call at %d, its result at %d: %v", call, result, kinds)
	}
	if text.String() != "The sum is 5" {
		t.Errorf("streamed text = %q", text.String())
	}
	out, err := a.Result(t.Context(), e.rt, runID)
	if err != nil || out.Output != "The sum is 5" {
		t.Fatalf("result: %v %v", out, err)
	}
}

func TestRunStreamStopsEarlyAndCancels(t *testing.T) {
	e := newEnv(t, nil)
	stopped := make(chan struct{})
	m := modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		<-stopped // answer only once the reader has gone
		return modeltest.Text("too late"), nil
	})
	a := agent.Must(agent.New[agent.NoDeps, string]("quitter", m, nil))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	var runID string
	for ev, err := range a.RunStream(runCtx(t), e.rt, "hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		break // after the input event
	}
	close(stopped)
	e.settle(t)
	st, err := e.rt.LoadRun(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || len(st.Messages) > 1 { // cancelled before or after the input was handled
		t.Fatalf("status = %s with %d messages, want cancelled before the answer was recorded", st.Status, len(st.Messages))
	}
}

func TestInvalidAgents(t *testing.T) {
	if _, err := agent.New[agent.NoDeps, string]("bad name", nil, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("bad name: %v", err)
	}
	type node struct {
		Next *node `json:"next"`
	}
	if _, err := agent.New[agent.NoDeps, node]("rec", nil, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("recursive output type: %v", err)
	}
	add := tool.Must(tool.New("add", "x", func(context.Context, addArgs) (int, error) { return 0, nil }))
	if _, err := agent.New[agent.NoDeps, string]("dup", nil, &agent.Options[agent.NoDeps]{Tools: []tool.Tool{add, add}}); err == nil {
		t.Errorf("duplicate tool accepted")
	}
}

func TestNoModel(t *testing.T) {
	e := newEnv(t, nil)
	a := agent.Must(agent.New[agent.NoDeps, string]("nomodel", nil, nil))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, "hi", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), model.ErrNoModel.Error()) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzDecodeRunState(f *testing.F) {
	good, _ := json.Marshal(agent.RunState{RunID: "r", Agent: "a", Status: agent.RunRunning, Step: 1,
		Messages: []model.Message{model.UserMessage("hi")}})
	f.Add(good)
	f.Add([]byte(`{"run_id":"r","agent":"a","status":"done","step":1}`))
	f.Add([]byte(`{"run_id":"r","agent":"a","status":"running","step":1,"history_len":5}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := agent.DecodeRunState(data)
		if err != nil {
			if !errors.Is(err, agent.ErrCorruptState) {
				t.Fatalf("error %v does not match ErrCorruptState", err)
			}
			return
		}
		_ = st.NewMessages() // must not panic on any accepted state
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.DecodeRunState(again); err != nil {
			t.Fatalf("a decoded state does not decode again: %v", err)
		}
	})
}

func FuzzDecodeSession(f *testing.F) {
	f.Add([]byte(`{"id":"s","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := agent.DecodeSession(data)
		if err != nil {
			if !errors.Is(err, agent.ErrCorruptState) {
				t.Fatalf("error %v does not match ErrCorruptState", err)
			}
			return
		}
		if s.ID == "" {
			t.Fatal("accepted a session without id")
		}
	})
}
