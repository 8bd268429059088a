package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// threadAgent serves an agent that calls add on its first turn of each
// prompt and then answers; it records the JSON of every model request.
func threadAgent(t *testing.T, e *env, name string) (*agent.Agent[string], func() []string) {
	t.Helper()
	var mu sync.Mutex
	var requests []string
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil }))
	a := serve(t, e, agent.Must(agent.New(name, modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		data, _ := json.Marshal(req.Messages)
		mu.Lock()
		requests = append(requests, string(data))
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleUser {
			return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
		}
		return modeltest.Text("The sum is " + last.Text()), nil
	}), &agent.Options{Instructions: "Add.", Tools: []tool.Tool{add}})))
	return a, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), requests...)
	}
}

// A conversation kept by the application (Thread in, Output.Thread out)
// is byte for byte the conversation a session keeps, and the model sees
// the same requests.
func TestThreadMatchesSession(t *testing.T) {
	e := newEnv(t, nil)
	bySession, sessionRequests := threadAgent(t, e, "by_session")
	byThread, threadRequests := threadAgent(t, e, "by_thread")
	prompts := []string{"add 2 and 3", "and again"}

	for _, p := range prompts {
		if _, err := bySession.Run(runCtx(t), e.rt, p, &agent.RunOptions{SessionID: "conv"}); err != nil {
			t.Fatal(err)
		}
	}
	var thread []model.Message
	var last *agent.Output[string]
	for _, p := range prompts {
		out, err := byThread.Run(runCtx(t), e.rt, p, &agent.RunOptions{Thread: thread})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Thread) != len(thread)+len(out.Messages) {
			t.Fatalf("thread of %d messages after a run that added %d to %d", len(out.Thread), len(out.Messages), len(thread))
		}
		thread, last = out.Thread, out
	}
	s, err := session.Load(t.Context(), e.rt.Store(), "conv")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(s.Messages)
	got, _ := json.Marshal(last.Thread)
	if string(got) != string(want) {
		t.Errorf("the thread differs from the session:\n got %s\nwant %s", got, want)
	}
	if sr, tr := sessionRequests(), threadRequests(); strings.Join(sr, "\n") != strings.Join(tr, "\n") || len(sr) != 4 {
		t.Errorf("the model's requests differ:\nsession %q\nthread  %q", sr, tr)
	}
	// The thread's runs left no session behind.
	if page, err := session.List(t.Context(), e.rt.Store(), nil); err != nil || len(page.Sessions) != 1 {
		t.Errorf("sessions: %+v, %v", page, err)
	}
}

// An empty prompt answers the thread as it is; a thread and a session
// together are refused.
func TestThreadWithoutPrompt(t *testing.T) {
	e := newEnv(t, nil)
	a, requests := threadAgent(t, e, "answerer")
	thread := []model.Message{model.UserMessage("add 2 and 3, please")}
	out, err := a.Run(runCtx(t), e.rt, "", &agent.RunOptions{Thread: thread})
	if err != nil || out.Output != "The sum is 5" {
		t.Fatal(out, err)
	}
	if out.Thread[0].Text() != "add 2 and 3, please" || len(out.Thread) != 4 || len(out.Messages) != 3 {
		t.Errorf("thread %d messages, run %d", len(out.Thread), len(out.Messages))
	}
	if r := requests(); len(r) != 2 || strings.Count(r[0], `"role":"user"`) != 1 {
		t.Errorf("first request %s", r[0])
	}
	if _, err := a.Run(runCtx(t), e.rt, "x", &agent.RunOptions{Thread: thread, SessionID: "s"}); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("thread and session: %v", err)
	}
}
