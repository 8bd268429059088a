package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

const (
	annToken = "ann-token-0123456789"
	bobToken = "bob-token-0123456789"
)

// convPrototypes: a conversational agent that may start the docmem agent.
var convPrototypes = []conversation.Prototype{
	{Name: "conversational-agent", Kind: conversation.KindLLM, Role: "Orchestrator", SystemPrompt: "You talk with the user.",
		Subagents: []string{"docmem-agent"}, Permissions: &conversation.Permissions{Mode: "accept_reads"}},
	{Name: "docmem-agent", Kind: conversation.KindCode, Role: "Tool executor for docmem operations"},
}

// sinceLastUser returns the text of the tool result answering call id
// after the request's last user message, if any.
func sinceLastUser(req *model.Request, id string) (string, bool) {
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == model.RoleUser {
			return "", false
		}
		if m.Role == model.RoleTool && m.ToolCallID == id {
			return m.Text(), true
		}
	}
	return "", false
}

// docmemDoc is the document convModel writes, and docmemLine its line.
const (
	docmemDoc  = "project-notes"
	docmemLine = "Decision: ship the <b>conversation</b> UI"
)

// convModel is the conversational agent's model: asked about docmem, it
// starts the docmem agent, has it create the document, append a line and
// read it back, then answers with what it read; otherwise it echoes the
// message. delay, when set, holds the answer after the read.
func convModel(delay time.Duration) modeltest.FunctionModel {
	return func(ctx context.Context, req *model.Request) (*model.Response, error) {
		var prompt string
		for _, m := range slices.Backward(req.Messages) {
			if m.Role == model.RoleUser {
				prompt = m.Text()
				break
			}
		}
		if !strings.Contains(prompt, "docmem") {
			return modeltest.Text("You said: " + prompt), nil
		}
		started, ok := sinceLastUser(req, "call_start")
		if !ok {
			resp := modeltest.ToolCalls(modeltest.Call("call_start", "start_conversation", `{"prototype":"docmem-agent"}`))
			resp.Message.Parts = []model.Part{model.TextPart("Starting the document memory.")}
			return resp, nil
		}
		var s struct{ Agent string }
		if err := json.Unmarshal([]byte(started), &s); err != nil {
			return nil, fmt.Errorf("start_conversation answered %q", started)
		}
		send := func(id string, cmd ...string) *model.Response {
			args, _ := json.Marshal(map[string]any{"agent": s.Agent, "command": cmd})
			return modeltest.ToolCalls(modeltest.Call(id, "send", string(args)))
		}
		if _, ok := sinceLastUser(req, "call_create"); !ok {
			return send("call_create", "docmem-create", docmemDoc), nil
		}
		if _, ok := sinceLastUser(req, "call_append"); !ok {
			return send("call_append", "docmem-append", docmemDoc, "root", docmemLine), nil
		}
		read, ok := sinceLastUser(req, "call_read")
		if !ok {
			return send("call_read", "docmem-read", docmemDoc), nil
		}
		var res docmem.Result
		if err := json.Unmarshal([]byte(read), &res); err != nil || !res.OK {
			return modeltest.Text("failed: " + read), nil
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return modeltest.Text("The document **" + docmemDoc + "** now reads:\n\n" + res.Text), nil
	}
}

// convServer is a server with conversations, on an in-process runtime:
// the host serves the conversational agent (m) and the docmem agent, the
// server records the histories; ann and bob have tokens.
func convServer(t *testing.T, m model.Model, wrap func(http.Handler) http.Handler) (*httptest.Server, *agent.Runtime) {
	t.Helper()
	ctx := t.Context()
	rt := testRuntime(t)
	st := rt.Store()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(ctx, convPrototypes, false); err != nil {
		t.Fatal(err)
	}
	ch := host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return m, nil },
		Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(st, nil).CodeHandler()},
	})
	if err := ch.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	log := eventlog.New(rt.Client(), st)
	if err := log.Record(ctx, nil); err != nil {
		t.Fatal(err)
	}
	echo := agent.Must(agent.New("echo", modeltest.NewTestModel(modeltest.Text("hi")), nil))
	if err := echo.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(rt, []runner.Runner{runner.Agent(echo)}, &server.Options{
		Log: log, Conversations: ch, Tokens: map[string]string{annToken: "ann", bobToken: "bob"}, RateLimit: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordConversations(ctx); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs, rt
}

// convView is GET /v1/conversations/{id}'s answer.
type convView struct {
	Conversation conversation.Conversation `json:"conversation"`
	Instances    []conversation.Instance   `json:"instances"`
	Topics       []conversation.Topic      `json:"topics"`
	Messages     []server.ConversationEntry
}

// getConv reads a conversation through the API.
func getConv(t *testing.T, url, token, id string) convView {
	t.Helper()
	status, body, _ := do(t, "GET", url+"/v1/conversations/"+id, token, "", nil)
	if status != 200 {
		t.Fatalf("GET conversation %s: %d %s", id, status, body)
	}
	var v convView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitMessages reads the conversation until its history has n messages.
func waitMessages(t *testing.T, url, token, id string, n int) []server.ConversationEntry {
	t.Helper()
	var msgs []server.ConversationEntry
	testwait.ForErr(t, 30*time.Second, fmt.Sprintf("%d messages in the history", n), func() error {
		if msgs = getConv(t, url, token, id).Messages; len(msgs) < n {
			return fmt.Errorf("%d messages: %+v", len(msgs), msgs)
		}
		return nil
	})
	return msgs
}

// createConv creates a conversation of token's user through the API.
func createConv(t *testing.T, url, token string) conversation.Conversation {
	t.Helper()
	status, body, h := do(t, "POST", url+"/v1/conversations", token, `{"description":"notes"}`, nil)
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var c conversation.Conversation
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	if h.Get("Location") != "/v1/conversations/"+c.ID {
		t.Errorf("Location %q", h.Get("Location"))
	}
	return c
}

// The conversations API: created by ann, listed and read by ann only (bob
// gets 404 for each endpoint), a message answered by the conversational
// agent and one that has it fill a docmem document and read it back, both
// in the user-facing history with their answers; bad requests refused;
// a stopped conversation refuses messages; a request without a token is
// refused before its body is read.
func TestConversationsAPI(t *testing.T) {
	hs, rt := convServer(t, convModel(0), nil)
	url := hs.URL

	c := createConv(t, url, annToken)
	if c.UserID != "ann" || c.Status != conversation.StatusRunning || c.Entry != convid.InstanceID("conversational-agent", c.ID) || c.Description != "notes" {
		t.Fatalf("created %+v", c)
	}
	// Created without a body too.
	if status, body, _ := do(t, "POST", url+"/v1/conversations", annToken, "", nil); status != 201 {
		t.Fatalf("create without a body: %d %s", status, body)
	}
	status, body, _ := do(t, "GET", url+"/v1/conversations", annToken, "", nil)
	var list struct{ Conversations []conversation.Conversation }
	if err := json.Unmarshal([]byte(body), &list); status != 200 || err != nil || len(list.Conversations) != 2 || list.Conversations[1].ID != c.ID {
		t.Fatalf("ann's list: %d %s", status, body)
	}
	status, body, _ = do(t, "GET", url+"/v1/conversations", bobToken, "", nil)
	if status != 200 || strings.TrimSpace(body) != `{"conversations":[]}` {
		t.Errorf("bob's list: %d %s", status, body)
	}
	// Another user's conversation is not found, whatever the endpoint.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/conversations/" + c.ID, ""},
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":"hi"}`},
		{"POST", "/v1/conversations/" + c.ID + "/stop", ""},
		{"GET", "/v1/conversations/not-a-uuid", ""},
	} {
		status, body, _ := do(t, r.method, url+r.path, bobToken, r.body, nil)
		if status != 404 || !strings.Contains(body, `"not_found"`) {
			t.Errorf("bob's %s %s: %d %s", r.method, r.path, status, body)
		}
	}

	// A message, answered.
	status, body, _ = do(t, "POST", url+"/v1/conversations/"+c.ID+"/messages", annToken, `{"message":"hello there"}`, nil)
	var sent server.ConversationEntry
	if err := json.Unmarshal([]byte(body), &sent); status != 202 || err != nil || sent.Seq != 1 || sent.From != "user" || sent.To != c.Entry || sent.ID == "" {
		t.Fatalf("message: %d %s", status, body)
	}
	msgs := waitMessages(t, url, annToken, c.ID, 2)
	if msgs[1].From != c.Entry || msgs[1].To != "user" || msgs[1].Message != "You said: hello there" || msgs[1].CorrelationID != sent.ID || msgs[1].Seq != 2 {
		t.Fatalf("the answer: %+v", msgs)
	}
	// One that has the agent fill a document and read it back.
	if status, body, _ = do(t, "POST", url+"/v1/conversations/"+c.ID+"/messages", annToken, `{"message":"write the decision in a docmem"}`, nil); status != 202 {
		t.Fatalf("message: %d %s", status, body)
	}
	msgs = waitMessages(t, url, annToken, c.ID, 4)
	if msgs[2].Message != "write the decision in a docmem" || !strings.Contains(msgs[3].Message, docmemLine) || msgs[3].Error {
		t.Fatalf("the docmem answer: %+v", msgs)
	}
	res, err := docmem.New(rt.Store(), nil).Apply(t.Context(), c.ID, docmem.Command{Command: docmem.CmdRead, Doc: docmemDoc})
	if err != nil || !strings.Contains(res.Text, docmemLine) {
		t.Errorf("the document: %+v %v", res, err)
	}
	v := getConv(t, url, annToken, c.ID)
	if len(v.Instances) != 2 || len(v.Topics) != 2 || v.Conversation.ID != c.ID {
		t.Errorf("instances %+v, topics %+v", v.Instances, v.Topics)
	}
	// ?after= reads the rest of the history.
	status, body, _ = do(t, "GET", url+"/v1/conversations/"+c.ID+"?after=3", annToken, "", nil)
	if err := json.Unmarshal([]byte(body), &v); status != 200 || err != nil || len(v.Messages) != 1 || v.Messages[0].Seq != 4 {
		t.Errorf("after 3: %d %s", status, body)
	}

	// Bad requests.
	for _, r := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":""}`, 400, "invalid_request"},
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":`, 400, "invalid_request"},
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":"a"} {}`, 400, "invalid_request"},
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":"` + strings.Repeat("a", server.MaxConversationText+1) + `"}`, 400, "invalid_request"},
		{"POST", "/v1/conversations/" + c.ID + "/messages", `{"message":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "request_too_large"},
		{"GET", "/v1/conversations/" + c.ID + "?after=-1", "", 400, "invalid_request"},
		{"POST", "/v1/conversations", `{"description":"` + strings.Repeat("d", 100<<10) + `"}`, 400, "invalid_request"},
		{"PUT", "/v1/conversations", "", 405, "method_not_allowed"},
	} {
		status, body, _ := do(t, r.method, url+r.path, annToken, r.body, nil)
		if status != r.status || !strings.Contains(body, `"code":"`+r.code+`"`) {
			t.Errorf("%s %s %.40s: %d %.300s", r.method, r.path, r.body, status, body)
		}
	}

	// A failed instance: its error in the conversation's instances, then
	// restarted.
	if err := conversation.NewConversations(rt.Store(), nil).Fail(t.Context(), c.ID, c.Entry, "the run failed: boom"); err != nil {
		t.Fatal(err)
	}
	v = getConv(t, url, annToken, c.ID)
	if i := slices.IndexFunc(v.Instances, func(in conversation.Instance) bool { return in.ID == c.Entry }); i < 0 ||
		v.Instances[i].Status != conversation.StatusError || v.Instances[i].Error != "the run failed: boom" {
		t.Errorf("the failed instance: %+v", v.Instances)
	}
	restart := url + "/v1/conversations/" + c.ID + "/instances/" + c.Entry + "/restart"
	if status, body, _ := do(t, "POST", restart, bobToken, "", nil); status != 404 {
		t.Errorf("bob's restart: %d %s", status, body)
	}
	status, body, _ = do(t, "POST", restart, annToken, "", nil)
	if status != 200 || !strings.Contains(body, `"status":"running"`) || strings.Contains(body, "boom") {
		t.Errorf("restart: %d %s", status, body)
	}

	// Stopped: messages refused, the history still read.
	status, body, _ = do(t, "POST", url+"/v1/conversations/"+c.ID+"/stop", annToken, "", nil)
	if status != 200 || !strings.Contains(body, `"status":"stopped"`) {
		t.Fatalf("stop: %d %s", status, body)
	}
	status, body, _ = do(t, "POST", url+"/v1/conversations/"+c.ID+"/messages", annToken, `{"message":"still there?"}`, nil)
	if status != 409 || !strings.Contains(body, `"code":"conversation_stopped"`) || !strings.Contains(body, "is stopped") {
		t.Errorf("a message to a stopped conversation: %d %s", status, body)
	}
	if v := getConv(t, url, annToken, c.ID); v.Conversation.Status != conversation.StatusStopped || len(v.Messages) != 4 {
		t.Errorf("after the stop: %+v", v)
	}

	// Without a token, refused before the body is read: the answer comes
	// at once, though the body never does, and the connection is closed.
	for _, path := range []string{"/v1/conversations", "/v1/conversations/" + c.ID + "/messages"} {
		resp, body := answer(t, rawRequest(t, url, path, ""))
		if resp.StatusCode != 401 || !strings.Contains(body, "invalid_api_key") {
			t.Errorf("%s without a token: %d %s", path, resp.StatusCode, body)
		}
	}
}

// The conversations over the WebSocket bridge: a page follows a
// conversation and says something; its message, the progress of the
// agent's run (its tool calls) and the answer come back; a second page
// that follows it from the start gets the same history, answers that came
// while it was away included; another user's conversation is not found.
func TestConversationWebSocket(t *testing.T) {
	hs, _ := convServer(t, convModel(0), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := createConv(t, hs.URL, annToken)
	// An answer that comes with no page open.
	if status, body, _ := do(t, "POST", hs.URL+"/v1/conversations/"+c.ID+"/messages", annToken, `{"message":"first"}`, nil); status != 202 {
		t.Fatalf("message: %d %s", status, body)
	}
	waitMessages(t, hs.URL, annToken, c.ID, 2)

	ws, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer." + annToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	type out struct {
		Type         string                    `json:"type"`
		ID           string                    `json:"id"`
		Run          string                    `json:"run"`
		Conversation string                    `json:"conversation"`
		Event        *eventlog.Event           `json:"event"`
		Entry        *server.ConversationEntry `json:"entry"`
		Message      string                    `json:"message"`
	}
	read := func() out {
		t.Helper()
		var m out
		if err := wsjson.Read(ctx, ws, &m); err != nil {
			t.Fatalf("read: %v", err)
		}
		return m
	}
	if err := wsjson.Write(ctx, ws, map[string]any{"type": "conversation", "conversation": c.ID, "after": 1}); err != nil {
		t.Fatal(err)
	}
	if m := read(); m.Type != "conversation_message" || m.Entry.Seq != 2 || m.Entry.Message != "You said: first" {
		t.Fatalf("the history after 1: %+v", m)
	}
	if err := wsjson.Write(ctx, ws, map[string]any{"type": "say", "id": "s1", "conversation": c.ID, "text": "put it in a docmem"}); err != nil {
		t.Fatal(err)
	}
	var entries []server.ConversationEntry
	var tools []string
	sent, answered := false, false
	// Until the answer and the output of the run that made it: the
	// progress may come after the answer.
	for len(entries) < 2 || !answered {
		m := read()
		switch m.Type {
		case "sent":
			sent = m.ID == "s1" && m.Entry.Seq == 3
		case "conversation_message":
			entries = append(entries, *m.Entry)
		case "event":
			if m.Conversation != c.ID || !strings.HasPrefix(m.Run, c.Entry+".") {
				t.Errorf("progress event %+v", m)
			}
			ev, err := agent.DecodeEvent(m.Event.Message)
			switch {
			case err != nil:
			case ev.Kind == agent.EventToolCall:
				tools = append(tools, ev.ToolCall.ToolName)
			case ev.Kind == agent.EventOutput && strings.Contains(string(ev.Output.Content), "ship the"):
				answered = true
			}
		case "error":
			t.Fatalf("error %+v", m)
		}
	}
	if !sent {
		t.Error("no sent answer to the say")
	}
	if entries[0].Seq != 3 || entries[0].From != "user" || entries[0].Message != "put it in a docmem" ||
		entries[1].Seq != 4 || !strings.Contains(entries[1].Message, docmemLine) {
		t.Errorf("the messages pushed: %+v", entries)
	}
	if !slices.Equal(tools, []string{"start_conversation", "send", "send", "send"}) {
		t.Errorf("the tool calls pushed as progress: %q", tools)
	}
	// Another user's conversation; an unknown message.
	ws2, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer." + bobToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws2.CloseNow()
	for _, msg := range []map[string]any{
		{"type": "conversation", "conversation": c.ID},
		{"type": "say", "conversation": c.ID, "text": "hi"},
	} {
		if err := wsjson.Write(ctx, ws2, msg); err != nil {
			t.Fatal(err)
		}
		var m out
		if err := wsjson.Read(ctx, ws2, &m); err != nil || m.Type != "error" || m.Message != `no conversation "`+c.ID+`"` {
			t.Errorf("bob's %v: %+v %v", msg["type"], m, err)
		}
	}
	// A page back from the start: the whole history, in order.
	if err := wsjson.Write(ctx, ws, map[string]any{"type": "conversation", "conversation": c.ID}); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for len(seqs) < 4 {
		if m := read(); m.Type == "conversation_message" {
			seqs = append(seqs, m.Entry.Seq)
		}
	}
	if !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Errorf("the history again: %v", seqs)
	}
}

// convPage is what conversation.mjs reads of the page.
type convPage struct {
	Conversation string `json:"conversation"`
	URL          string `json:"url"`
	Log          string `json:"log"`
	Bubbles      []struct {
		Cls, Text string
	} `json:"bubbles"`
	Progress []struct {
		Open    bool     `json:"open"`
		Summary string   `json:"summary"`
		Tools   []string `json:"tools"`
	} `json:"progress"`
	Strong  []string `json:"strong"`
	Hostile int      `json:"hostile"`
	Listed  []struct {
		ID      string `json:"id"`
		Current bool   `json:"current"`
	} `json:"listed"`
	Errors []any `json:"errors"`
}

// The web chat's conversations in headless Chromium: a new conversation
// started from the page; a message that has the conversational agent
// start the docmem agent and create, fill and read back a document; the
// agent's tool calls shown while it works, then its answer (Markdown,
// HTML in it shown as text); the page reloaded shows the history; a
// message sent through the API while the page is away is answered, and
// the page back shows it, then answers another live. The page's sockets
// open a second late.
func TestConversationInBrowser(t *testing.T) {
	chromium(t)
	node := peers.Node(t)
	peers.Package(t, "playwright-core/package.json")
	hs, rt := convServer(t, convModel(1500*time.Millisecond), slowSockets)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(peers.Dir(), "browser", "conversation.mjs"), hs.URL+"/", annToken, screenshots(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser: %v\n%s\n%s", err, stdout, stderr.String())
	}
	t.Logf("browser:\n%s", stdout)
	steps := map[string]convPage{}
	for _, line := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
		var s struct {
			Step string `json:"step"`
		}
		var p convPage
		if json.Unmarshal([]byte(line), &s) != nil || json.Unmarshal([]byte(line), &p) != nil {
			t.Fatalf("line %q", line)
		}
		steps[s.Step] = p
	}
	progress, live, reloaded, away := steps["progress"], steps["live"], steps["reloaded"], steps["away"]
	conv := progress.Conversation
	if conv == "" {
		t.Fatalf("steps %+v\n%s", steps, stderr.String())
	}
	// While it works: the question, then the run's tool calls, no answer.
	if len(progress.Bubbles) != 1 || progress.Bubbles[0].Cls != "msg user" || progress.Bubbles[0].Text != "write the decision in a docmem" {
		t.Errorf("while working, the bubbles: %+v", progress.Bubbles)
	}
	if len(progress.Progress) != 1 || !progress.Progress[0].Open || len(progress.Progress[0].Tools) != 4 ||
		!strings.HasPrefix(progress.Progress[0].Tools[0], "⚙ start_conversation") || !strings.Contains(progress.Progress[0].Tools[1], "docmem-create") ||
		!strings.Contains(progress.Progress[0].Tools[3], "docmem-read") {
		t.Errorf("while working, the progress: %+v", progress.Progress)
	}
	// The answer: the document read back, the work folded under the question.
	for name, p := range map[string]convPage{"live": live, "reloaded": reloaded} {
		if len(p.Bubbles) != 2 || p.Bubbles[0].Cls != "msg user" || p.Bubbles[1].Cls != "msg assistant" ||
			!strings.Contains(p.Bubbles[1].Text, docmemLine) || !slices.Equal(p.Strong, []string{docmemDoc}) || p.Hostile != 0 {
			t.Errorf("%s: %+v", name, p)
		}
		if p.URL != "?conversation="+conv || len(p.Listed) != 1 || p.Listed[0].ID != conv || !p.Listed[0].Current {
			t.Errorf("%s: the URL %q, the list %+v", name, p.URL, p.Listed)
		}
		if len(p.Errors) > 0 {
			t.Errorf("%s: page errors %v", name, p.Errors)
		}
	}
	if len(live.Progress) != 1 || live.Progress[0].Open || live.Progress[0].Summary != "⚙ 4 tool calls" {
		t.Errorf("live, the progress after the answer: %+v", live.Progress)
	}
	if len(reloaded.Progress) != 0 {
		t.Errorf("reloaded, the progress of a run that ended: %+v", reloaded.Progress)
	}
	var texts []string
	for _, b := range away.Bubbles {
		texts = append(texts, b.Text)
	}
	if len(texts) != 6 || texts[2] != "and hello" || texts[3] != "You said: and hello" || texts[4] != "still here" || texts[5] != "You said: still here" {
		t.Errorf("back after the answer that came while away: %q", texts)
	}
	// The document is the docmem agent's.
	res, err := docmem.New(rt.Store(), nil).Apply(ctx, conv, docmem.Command{Command: docmem.CmdRead, Doc: docmemDoc})
	if err != nil || !strings.Contains(res.Text, docmemLine) {
		t.Errorf("the document: %+v %v", res, err)
	}
}
