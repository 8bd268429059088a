package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// A server made without an event log serves the web chat at / anyway,
// and its bridge runs an agent: the server records a log of its own.
func TestChatWithoutLog(t *testing.T) {
	rt := testRuntime(t)
	a := agent.Must(agent.New("echo", modeltest.NewTestModel(modeltest.Text("hello there")), nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(rt, []runner.Runner{runner.Agent(a)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "app.js") {
		t.Fatalf("GET /: %d %.200s", resp.StatusCode, page)
	}
	if out := chatRun(t, hs.URL, "echo", "hi"); out != "hello there" {
		t.Errorf("the answer in the web chat = %q", out)
	}
}

// The web chat runs a team and a workflow as it runs an agent: started
// over the bridge, their events followed to their own output.
func TestWebChatRunsTeamsAndWorkflows(t *testing.T) {
	rt := testRuntime(t)
	ctx := t.Context()
	writer := agent.Must(agent.New("writer", modeltest.NewTestModel(modeltest.Text("a draft")), nil))
	editor := agent.Must(agent.New("editor", modeltest.NewTestModel(modeltest.Text("an edited draft")), nil))
	for _, a := range []*agent.Agent[string]{writer, editor} {
		if err := a.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	tm, err := team.NewSequential("pair", []team.Member{team.AgentMember(writer), team.AgentMember(editor)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type doc struct{ Text string }
	bang := func(_ context.Context, d doc) (doc, error) { d.Text += "!"; return d, nil }
	wf := workflow.New[doc]("bang", nil).Node("first", workflow.Func(bang)).Edge(workflow.Start, "first").Edge("first", workflow.End).MustBuild()
	runners := []runner.Runner{
		runner.Team(tm),
		runner.Workflow(wf, "adds a bang", func(p string) (doc, error) { return doc{Text: p}, nil }, func(d doc) (string, error) { return d.Text, nil }),
	}
	for _, r := range runners {
		if err := r.(runner.Servable).Serve(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	s, err := server.New(rt, runners, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	if out := chatRun(t, hs.URL, "pair", "write"); out != `"an edited draft"` {
		t.Errorf("the team's output in the web chat = %s", out)
	}
	if out := chatRun(t, hs.URL, "bang", "hey"); !strings.Contains(out, `"Text":"hey!"`) {
		t.Errorf("the workflow's output in the web chat = %s", out)
	}
}

// chatRun runs name with text over the bridge of the server at url, as
// the web chat does, and returns the data of the run's own output: its
// content (text unquoted), or the whole output as JSON when it has none.
func chatRun(t *testing.T, url, name, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := dialWS(t, ctx, url, []string{server.WSProtocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := wsjson.Write(ctx, c, map[string]any{"type": "run", "id": "m1", "agent": name, "session": "chat-" + name, "text": text}); err != nil {
		t.Fatal(err)
	}
	started := readWS(t, ctx, c)
	if started.Type != "started" {
		t.Fatalf("run %s: %+v", name, started)
	}
	var out json.RawMessage
	for {
		m := readWS(t, ctx, c)
		switch m.Type {
		case "event":
			msg := m.Event.Message
			if strings.HasSuffix(msg.Channel, ".output") && strings.HasPrefix(msg.Key, started.Run) {
				out = msg.Data
			}
		case "end":
			var o struct {
				Status  string          `json:"status"`
				Content json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(out, &o); err != nil {
				t.Fatalf("output %s: %v", out, err)
			}
			if o.Status != "complete" {
				t.Fatalf("run %s ended: %s", name, out)
			}
			if o.Content == nil {
				return string(out)
			}
			var s string
			if json.Unmarshal(o.Content, &s) == nil && name == "echo" {
				return s
			}
			return string(o.Content)
		default:
			t.Fatalf("run %s: unexpected %+v", name, m)
		}
	}
}
