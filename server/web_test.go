package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/workflow"
)

// chromium returns the path of Debian's Chromium, or skips the test when
// it is not installed (fails it under CALF_TEST_SERVICES).
func chromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatal("chromium is not installed (apt-get install chromium)")
		}
		t.Skip("chromium is not installed")
	}
}

// screenshots returns the directory CALF_SCREENSHOTS names, where the
// browser tests save their screenshots, or "" when it is not set. A
// relative directory is the repository's ("docs" is docs/, not
// server/docs/).
func screenshots(t *testing.T) string {
	dir := os.Getenv("CALF_SCREENSHOTS")
	if dir == "" || filepath.IsAbs(dir) {
		return dir
	}
	abs, err := filepath.Abs(filepath.Join("..", dir))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// slowSockets delays each WebSocket upgrade of h by a second, as a slow
// network would: what a page does before its socket is open must wait for
// it.
func slowSockets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ws" {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
			}
		}
		h.ServeHTTP(w, r)
	})
}

// markdownAnswer is what markdownAgent answers after its tool's result:
// Markdown with a heading, a code block, lists and a link, and hostile
// HTML and links that must show as text.
const markdownAnswer = "## Done: %s\n\n" +
	"The sum, computed by `add`:\n\n" +
	"```go\nfmt.Println(2 + 3) // <b>5</b>\n```\n\n" +
	"- the first **item**\n- the second, with [the docs](https://example.com/docs)\n  - nested\n\n" +
	"1. one\n2. two\n\n" +
	"<img src=x onerror=\"document.title='pwned'\"> [click](javascript:document.title='pwned') " +
	"[again](JaVaScRiPt:alert(1)) <a href=\"javascript:alert(2)\">raw</a> <script>document.title='pwned'</script>"

// markdownAgent is approvalAgent that says something before its tool call,
// and answers in Markdown (markdownAnswer) delay after the tool's result.
func markdownAgent(delay time.Duration) *agent.Agent[string] {
	answer := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return modeltest.Text(fmt.Sprintf(markdownAnswer, last.Text())), nil
		}
		resp := modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`))
		resp.Message.Parts = []model.Part{model.TextPart("Let me **add** them.")}
		return resp, nil
	})
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}))
	return agent.Must(agent.New("calc", modeltest.NewTestModel(answer, answer, answer, answer), &agent.Options{
		Tools:       []tool.Tool{add},
		Permissions: &agent.Permissions{Mode: agent.PermissionAcceptReads},
	}))
}

// chatView is what chat.mjs reads of the chat (its snapshot).
type chatView struct {
	Log     string `json:"log"`
	Bubbles []struct {
		Cls  string `json:"cls"`
		HTML string `json:"html"`
	} `json:"bubbles"`
	Tools     []string `json:"tools"`
	Results   []string `json:"results"`
	Approvals []string `json:"approvals"`
	Usage     []string `json:"usage"`
	Code      []string `json:"code"`
	Items     []string `json:"items"`
	Headings  []string `json:"headings"`
	Strong    []string `json:"strong"`
	Links     []struct {
		Href, Rel, Text string
	} `json:"links"`
	Hostile struct {
		Elements    int      `json:"elements"`
		Handlers    int      `json:"handlers"`
		ScriptLinks []string `json:"scriptLinks"`
		Title       string   `json:"title"`
	} `json:"hostile"`
	Errors []any `json:"errors"`
}

// The web chat in headless Chromium: a question streams an answer after a
// tool call approved in the page; a reload in the middle of the run shows
// the rest; a reload after the run shows the same as the page showed live
// (one answer with its text, its tool call and result, its approval, its
// Markdown rendered with nothing hostile made live, its tokens: it showed
// only the text, in two answers, before); another user's token sees
// nothing of the first user's session. The page's WebSockets open a second
// late, as on a slow network: the question, asked before the page's socket
// is open, waits for it (it was lost before).
func TestWebChatInBrowser(t *testing.T) {
	chromium(t)
	node := peers.Node(t)
	peers.Package(t, "playwright-core/package.json")
	rt := testRuntime(t)
	// The answer comes two seconds after the tool: time for the page to
	// reload in the middle of the run.
	a := markdownAgent(2 * time.Second)
	hs, _ := serveAgentThrough(t, rt, a, true, &server.Options{Tokens: map[string]string{"ann-token-0123456789": "ann", "bob-token-0123456789": "bob"}}, slowSockets)
	// And an older session of ann's, whose runs' records are gone: its
	// messages alone.
	older := &session.Session{ID: "web-older", Title: "one and one", Messages: []model.Message{
		model.UserMessage("add 1 and 1"),
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("Let me **add** them.")}, ToolCalls: []model.ToolCall{modeltest.Call("call_9", "add", `{"a":1,"b":1}`)}},
		{Role: model.RoleTool, ToolCallID: "call_9", ToolName: "add", Parts: []model.Part{model.TextPart("2")}},
		model.AssistantMessage("It is *2*."),
	}}
	if err := session.Save(t.Context(), rt.Store(), older); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Store().Put(t.Context(), server.KindSessionOwner, older.ID, []byte(`{"user":"ann"}`), 0); err != nil {
		t.Fatal(err)
	}

	shots := screenshots(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(peers.Dir(), "browser", "chat.mjs"), hs.URL+"/", "ann-token-0123456789", "bob-token-0123456789", shots, older.ID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("browser:\n%s", out)
	steps2 := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s map[string]any
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		steps2[s["step"].(string)] = s
	}
	if s := steps2["approval"]; !strings.Contains(s["tool"].(string), "add") || !strings.Contains(s["tool"].(string), `"a":2`) {
		t.Errorf("the tool call shown: %v", s)
	}
	ans := steps2["answer"]
	log := ans["log"].(string)
	if !strings.Contains(log, "add 2 and 3") || !strings.Contains(log, "Done: 5") || strings.Count(log, "Done: 5") != 1 {
		t.Errorf("the chat after the reload: %q", log)
	}
	if errs := ans["errors"].([]any); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
	if !strings.Contains(ans["cost"].(string), "tokens in") {
		t.Errorf("the session's cost: %v", ans["cost"])
	}
	views := map[string]chatView{}
	for _, step := range []string{"live", "reloaded", "older"} {
		b, _ := json.Marshal(steps2[step])
		var v chatView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		views[step] = v
	}
	live, reloaded, old := views["live"], views["reloaded"], views["older"]
	delete(views, "older")
	for name, v := range views {
		if len(v.Bubbles) != 2 || v.Bubbles[0].Cls != "msg user" || v.Bubbles[1].Cls != "msg assistant" {
			t.Errorf("%s: the bubbles are %+v", name, v.Bubbles)
		}
		if len(v.Tools) != 1 || !strings.Contains(v.Tools[0], `add {"a":2,"b":3} ✓`) || len(v.Results) != 1 || v.Results[0] != "success: 5" {
			t.Errorf("%s: the tool calls %q, their results %q", name, v.Tools, v.Results)
		}
		if len(v.Approvals) != 1 || v.Approvals[0] != "approval of add: approved" {
			t.Errorf("%s: the approvals %q", name, v.Approvals)
		}
		if len(v.Usage) != 1 || !strings.Contains(v.Usage[0], "tokens in") {
			t.Errorf("%s: the usage %q", name, v.Usage)
		}
		if len(v.Code) != 1 || v.Code[0] != "fmt.Println(2 + 3) // <b>5</b>" || !slices.Equal(v.Headings, []string{"Done: 5"}) ||
			!slices.Contains(v.Strong, "add") || !slices.Contains(v.Strong, "item") {
			t.Errorf("%s: the Markdown's code %q, headings %q, bold %q", name, v.Code, v.Headings, v.Strong)
		}
		if len(v.Items) != 5 || !strings.HasPrefix(v.Items[1], "the second, with the docs") || v.Items[3] != "one" {
			t.Errorf("%s: the list items %q", name, v.Items)
		}
		if len(v.Links) != 1 || v.Links[0].Href != "https://example.com/docs" || v.Links[0].Rel != "noopener noreferrer" || v.Links[0].Text != "the docs" {
			t.Errorf("%s: the links %+v", name, v.Links)
		}
		if h := v.Hostile; h.Elements != 0 || h.Handlers != 0 || len(h.ScriptLinks) != 0 || h.Title == "pwned" {
			t.Errorf("%s: hostile content made live: %+v", name, h)
		}
		if !strings.Contains(v.Log, `<img src=x onerror="document.title='pwned'">`) || !strings.Contains(v.Log, "<script>") {
			t.Errorf("%s: the hostile HTML is not shown as text: %q", name, v.Log)
		}
		if len(v.Errors) > 0 {
			t.Errorf("%s: page errors: %v", name, v.Errors)
		}
	}
	if len(live.Bubbles) == len(reloaded.Bubbles) {
		for i := range live.Bubbles {
			if live.Bubbles[i] != reloaded.Bubbles[i] {
				t.Errorf("bubble %d live:\n%s\nafter the reload:\n%s", i, live.Bubbles[i].HTML, reloaded.Bubbles[i].HTML)
			}
		}
	}
	// The older session: its question and its answer, with the tool call
	// and its result, without usage.
	if len(old.Bubbles) != 2 || old.Bubbles[1].Cls != "msg assistant" || !slices.Equal(old.Tools, []string{`⚙ add {"a":1,"b":1} ✓`}) ||
		!slices.Equal(old.Results, []string{"success: 2"}) || len(old.Usage) != 0 || !strings.Contains(old.Log, "It is 2.") || !slices.Equal(old.Strong, []string{"add"}) {
		t.Errorf("the older session: %+v", old)
	}
	other := steps2["other"]
	if listed := other["listed"].([]any); len(listed) != 0 {
		t.Errorf("bob sees sessions %v", listed)
	}
	if other["status"] != 404.0 {
		t.Errorf("bob reads ann's session: %v", other["status"])
	}
}

// The run inspector in headless Chromium: a run in progress, opened from
// the runs list, drawn while it runs and again after its output; the tool
// call's edge clicked for its payload, timings and workers; the run's dead
// letter replayed from the page. The page's socket opens a second late.
func TestRunInspectorInBrowser(t *testing.T) {
	chromium(t)
	node := peers.Node(t)
	peers.Package(t, "playwright-core/package.json")
	b := memory.New(nil)
	c := calf.NewClient(b, &calf.Options{Name: "worker-a/1"})
	st := storemem.New()
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	rt := agent.NewRuntime(c, st, nil)
	// The model answers after the tool only once the page has drawn the
	// run in progress.
	release := make(chan struct{})
	answer := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return modeltest.Text("Done: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	})
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}))
	a := agent.Must(agent.New("calc", modeltest.NewTestModel(answer, answer), &agent.Options{Tools: []tool.Tool{add}}))
	// And a workflow of two nodes, whose run is drawn with its nodes.
	type doc struct{ Text string }
	bang := func(_ context.Context, d doc) (doc, error) { d.Text += "!"; return d, nil }
	wf := workflow.New[doc]("bang", nil).Node("first", workflow.Func(bang)).Node("second", workflow.Func(bang)).
		Edge(workflow.Start, "first").Edge("first", "second").Edge("second", workflow.End).MustBuild()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	log := eventlog.New(c, st)
	if err := log.Record(ctx, nil); err != nil {
		t.Fatal(err)
	}
	const ann = "ann-token-0123456789"
	srv, err := server.New(rt, []runner.Runner{runner.Agent(a), runner.Workflow(wf, "Bangs.", func(p string) (doc, error) { return doc{Text: p}, nil }, func(d doc) (string, error) { return d.Text, nil })},
		&server.Options{Log: log, Tokens: map[string]string{ann: "ann", "bob-token-0123456789": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	// The page's socket opens late: the run clicked before it is open is
	// followed once it is.
	hs := httptest.NewServer(slowSockets(srv.Handler()))
	t.Cleanup(hs.Close)
	status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", ann, `{"model":"bang","messages":[{"role":"user","content":"hey"}]}`, nil)
	if status != 200 || !strings.Contains(body, "hey!!") {
		t.Fatalf("the workflow's run: %d %s", status, body)
	}
	wfRun := h.Get(server.RunHeader)

	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(`{"model":"calc","messages":[{"role":"user","content":"add 2 and 3"}]}`))
		req.Header.Set("Authorization", "Bearer "+ann)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	var run string
	testwait.For(t, 2*time.Minute, "the run to start", func() bool {
		runs, err := runner.Runs(ctx, st, &runner.RunFilter{Status: "running"})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 0 {
			run = runs[0].ID
		}
		return run != ""
	})
	// A message of the run, parked, as the worker's recorder records it.
	orig := &calf.Message{ID: "m-1", Channel: "calf.test.parked", Key: run, Data: json.RawMessage(`{"n":1}`),
		Metadata: calf.Metadata{CorrelationID: run, RunID: run, Time: time.Now()}}
	dl := calf.NewDeadLetterMessage(orig, "g", errors.New("it broke"), 3, time.Now())
	if err := deadletter.Handler(st)(ctx, dl); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, node, filepath.Join(peers.Dir(), "browser", "inspect.mjs"), hs.URL+"/", ann, run, screenshots(t), wfRun)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s map[string]any
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps[s["step"].(string)] = s
		if s["step"] == "running" {
			close(release)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("browser: %v\n%s", err, stderr.String())
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	rows := func(s map[string]any) string {
		b, _ := json.Marshal(s["rows"])
		return string(b)
	}
	running, ended := steps["running"], steps["ended"]
	if running == nil || ended == nil || steps["letters"] == nil {
		t.Fatalf("steps: %v\n%s", steps, stderr.String())
	}
	if !slices.Contains(running["listed"].([]any), any(run)) {
		t.Errorf("the runs list: %v", running["listed"])
	}
	var nodes []string
	for _, n := range running["nodes"].([]any) {
		nodes = append(nodes, n.(string))
	}
	for _, want := range []string{"caller", "calc", "calc · model", "add"} {
		if !slices.ContainsFunc(nodes, func(n string) bool { return n == want || strings.HasPrefix(n, want+" (") }) {
			t.Errorf("while running, no node %q in %q", want, nodes)
		}
	}
	if r := rows(running); !strings.Contains(r, "tool_call.add") || !strings.Contains(r, `"calc · model → add"`) || !strings.Contains(r, `"add → calc"`) || strings.Contains(r, `"output"`) {
		t.Errorf("while running, the events: %s", r)
	}
	if ended["edges"].(float64) <= running["edges"].(float64) {
		t.Errorf("edges: %v while running, %v after", running["edges"], ended["edges"])
	}
	if r := rows(ended); !strings.Contains(r, `"output","calc · model → caller","worker-a/1"`) {
		t.Errorf("after the output, the events: %s", r)
	}
	payload := ended["payload"].(string)
	for _, want := range []string{"tool_call.add", `"arguments": "{\"a\":2,\"b\":3}"`, "published byworker-a/1", "handled byworker-a/1", "after its cause"} {
		if !strings.Contains(payload, want) {
			t.Errorf("the payload panel does not show %q:\n%s", want, payload)
		}
	}
	if sel := ended["selected"].([]any); len(sel) != 1 || sel[0] != ended["seq"] {
		t.Errorf("selected edges %v, clicked %v", sel, ended["seq"])
	}
	if !strings.Contains(ended["head"].(string), "agent calc · run "+run) {
		t.Errorf("the run's heading: %v", ended["head"])
	}
	if errs := ended["errors"].([]any); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
	if l, _ := json.Marshal(steps["letters"]["letters"]); !strings.Contains(string(l), "calf.test.parked") || !strings.Contains(string(l), "it broke") {
		t.Errorf("the dead letters: %s", l)
	}
	rec, err := deadletter.Get(ctx, st, dl.ID)
	if err != nil || !rec.Replayed() {
		t.Errorf("the dead letter after Replay was clicked: %+v %v", rec, err)
	}
	// The workflow's run: its nodes are nodes of the drawing, each step
	// drawn from what caused it (a node starts the next step itself).
	w := steps["workflow"]
	if w == nil {
		t.Fatalf("no workflow step: %v", steps)
	}
	if r := rows(w); !strings.Contains(r, `"bang (workflow) → bang · first"`) || !strings.Contains(r, `"bang · first → bang (workflow)"`) || !strings.Contains(r, `"bang · first → bang · second"`) || !strings.Contains(r, `"bang · second → bang (workflow)"`) || !strings.Contains(r, `"output","bang · second → caller"`) {
		t.Errorf("the workflow run's events: %s", r)
	}
	if !strings.Contains(w["head"].(string), "workflow bang · run "+wfRun+" · complete") {
		t.Errorf("the workflow run's heading: %v", w["head"])
	}
}
