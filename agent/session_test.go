package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

func TestSessionContinues(t *testing.T) {
	e := newEnv(t, nil)
	m := modeltest.NewTestModel(modeltest.Text("Nice to meet you, Ada."), modeltest.Text("Your name is Ada."))
	a := agent.Must(agent.New("chat", m, &agent.Options{Instructions: "Be brief."}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	opts := &agent.RunOptions{SessionID: "s1"}
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
	s, err := session.Load(t.Context(), e.rt.Store(), "s1")
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
	if err := session.Delete(t.Context(), e.rt.Store(), "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Load(t.Context(), e.rt.Store(), "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
	restored := new(session.Session)
	if err := json.Unmarshal(data, restored); err != nil {
		t.Fatal(err)
	}
	if err := session.Save(t.Context(), e.rt.Store(), restored); err != nil {
		t.Fatal(err)
	}
	again, err := session.Load(t.Context(), e.rt.Store(), "s1")
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

// search is the handle of searchDeps, shared by the tools and the callers.
var search agent.Deps[searchDeps]

// Deps.Of of a context that belongs to no agent run, such as a tool's
// called directly, is an error.
func TestDepsOfOutsideARun(t *testing.T) {
	if _, err := search.Of(t.Context()); err == nil || !strings.Contains(err.Error(), "outside an agent run") {
		t.Errorf("Of outside a run: %v; want an error saying so", err)
	}
	if _, ok := agent.FromContext(t.Context()); ok {
		t.Error("FromContext outside a run reports a run")
	}
}

func TestDepsReachTools(t *testing.T) {
	mk := func(t *testing.T) *agent.Agent[string] {
		echo, err := tool.New("echo", "Echo with the prefix.", func(ctx context.Context, in echoArgs) (string, error) {
			rc, ok := agent.FromContext(ctx)
			if !ok || rc.ToolCallID != "c1" || rc.Agent != "deps" || rc.RunID == "" || rc.Step != 1 {
				return "", errors.New("run context incomplete")
			}
			d, err := search.Of(ctx)
			return d.Prefix + in.Text, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return agent.Must(agent.New("deps", oneCall("echo", `{"text":"hi"}`), &agent.Options{
			Tools: []tool.Tool{echo},
			InstructionsFunc: func(rc agent.RunContext) (string, error) {
				d, err := search.Of(rc)
				return "prefix is " + d.Prefix, err
			},
		}))
	}
	t.Run("travel with the run", func(t *testing.T) {
		e := newEnv(t, nil)
		a := mk(t)
		if err := a.Serve(t.Context(), e.rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{Deps: search.Value(searchDeps{Prefix: "run:"})})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "saw: run:hi" {
			t.Fatalf("output = %q", out.Output)
		}
		// They travel as JSON, in the run's record as before.
		st, err := e.rt.LoadState(runCtx(t), out.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if string(st.Deps) != `{"prefix":"run:"}` {
			t.Errorf("the run's record carries deps %s", st.Deps)
		}
	})
	t.Run("local to the worker", func(t *testing.T) {
		e := newEnv(t, nil)
		a := mk(t)
		if err := a.Serve(t.Context(), e.rt, &agent.ServeOptions{LocalDeps: func() agent.DepsValue { return search.Value(searchDeps{Prefix: "local:"}) }}); err != nil {
			t.Fatal(err)
		}
		out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{Deps: search.Value(searchDeps{Prefix: "run:"})})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "saw: local:hi" {
			t.Fatalf("output = %q", out.Output)
		}
	})
	t.Run("none given", func(t *testing.T) {
		e := newEnv(t, nil)
		a := mk(t)
		if err := a.Serve(t.Context(), e.rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := a.Run(runCtx(t), e.rt, "go", nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "saw: hi" {
			t.Fatalf("output = %q", out.Output)
		}
	})
}

// otherDeps is read through a handle of another type than the one the
// run's dependencies were given with.
type otherDeps struct {
	Prefix int `json:"prefix"`
}

// Dependencies given through one handle and read through a handle of
// another type are an error the tool sees (and the model gets), not a
// zero value.
func TestDepsOfAnotherTypeAreAnError(t *testing.T) {
	var other agent.Deps[otherDeps]
	var seen atomic.Value
	check, err := tool.New("echo", "Echo.", func(ctx context.Context, in echoArgs) (string, error) {
		_, err := other.Of(ctx)
		if err != nil {
			seen.Store(err.Error())
		}
		return "", err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, local := range []bool{false, true} {
		e := newEnv(t, nil)
		a := agent.Must(agent.New("deps", oneCall("echo", `{"text":"hi"}`), &agent.Options{Tools: []tool.Tool{check}}))
		var so *agent.ServeOptions
		if local {
			so = &agent.ServeOptions{LocalDeps: func() agent.DepsValue { return search.Value(searchDeps{Prefix: "local:"}) }}
		}
		if err := a.Serve(t.Context(), e.rt, so); err != nil {
			t.Fatal(err)
		}
		seen.Store("")
		if _, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{Deps: search.Value(searchDeps{Prefix: "run:"})}); err != nil {
			t.Fatal(err)
		}
		got, _ := seen.Load().(string)
		want := "decode the run's dependencies as a agent_test.otherDeps"
		if local {
			want = "are a agent_test.searchDeps, not a agent_test.otherDeps"
		}
		if !strings.Contains(got, want) {
			t.Errorf("local=%v: the tool's error = %q, want it to contain %q", local, got, want)
		}
	}
}

func TestUnserializableDepsAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	var chans agent.Deps[chan int]
	a := agent.Must(agent.New("chans", modeltest.NewTestModel(modeltest.Text("x")), nil))
	_, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{Deps: chans.Value(make(chan int))})
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
	var local agent.Deps[localDeps]
	lookup, err := tool.New("lookup", "Look a word up.", func(ctx context.Context, in echoArgs) (string, error) {
		d, err := local.Of(ctx)
		if err != nil {
			return "", err
		}
		if d.Lookup == nil {
			return "", errors.New("no local deps")
		}
		return d.Lookup(in.Text), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := agent.Must(agent.New("local", oneCall("lookup", `{"text":"calf"}`), &agent.Options{Tools: []tool.Tool{lookup}}))
	if err := a.Serve(t.Context(), e.rt, &agent.ServeOptions{LocalDeps: func() agent.DepsValue {
		return local.Value(localDeps{Lookup: strings.ToUpper, Events: make(chan string)})
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
	st, err := e.rt.LoadState(runCtx(t), out.RunID)
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
	out, err := a.Wait(t.Context(), e.rt, runID)
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
	a := agent.Must(agent.New("quitter", m, nil))
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
	st, err := e.rt.LoadState(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || len(st.Messages) > 1 { // cancelled before or after the input was handled
		t.Fatalf("status = %s with %d messages, want cancelled before the answer was recorded", st.Status, len(st.Messages))
	}
}

func TestInvalidAgents(t *testing.T) {
	if _, err := agent.New("bad name", nil, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("bad name: %v", err)
	}
	type node struct {
		Next *node `json:"next"`
	}
	if _, err := agent.NewTyped[node]("rec", nil, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("recursive output type: %v", err)
	}
	add := tool.Must(tool.New("add", "x", func(context.Context, addArgs) (int, error) { return 0, nil }))
	if _, err := agent.New("dup", nil, &agent.Options{Tools: []tool.Tool{add, add}}); err == nil {
		t.Errorf("duplicate tool accepted")
	}
}

func TestNoModel(t *testing.T) {
	e := newEnv(t, nil)
	a := agent.Must(agent.New("nomodel", nil, nil))
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
		Transcript: agent.Transcript{Messages: []model.Message{model.UserMessage("hi")}}})
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
