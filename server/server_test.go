package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// wordModel answers with answer(req), streamed word by word, and keeps
// what each call was sent.
type wordModel struct {
	answer func(req *model.Request) (string, error)
	mu     sync.Mutex
	seen   [][]model.Message
}

func (m *wordModel) Name() string { return "words" }

func (m *wordModel) Generate(_ context.Context, req *model.Request) (*model.Response, error) {
	m.mu.Lock()
	m.seen = append(m.seen, append([]model.Message(nil), req.Messages...))
	m.mu.Unlock()
	text, err := m.answer(req)
	if err != nil {
		return nil, err
	}
	r := modeltest.Text(text)
	r.Usage = model.Usage{Requests: 1, InputTokens: 10, OutputTokens: int64(len(strings.Fields(text))), TotalTokens: 10 + int64(len(strings.Fields(text)))}
	return r, nil
}

func (m *wordModel) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		resp, err := m.Generate(ctx, req)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		words := strings.SplitAfter(resp.Message.Text(), " ")
		for _, w := range words {
			if !yield(model.Chunk{Delta: &model.Delta{Text: w}}, nil) {
				return
			}
		}
		yield(model.Chunk{Response: resp}, nil)
	}
}

// lastSeen returns the messages of the model's last call, as role:text.
func (m *wordModel) lastSeen() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, msg := range m.seen[len(m.seen)-1] {
		parts = append(parts, string(msg.Role)+":"+msg.Text())
	}
	return strings.Join(parts, "|")
}

// echoAnswer answers "you said: " and the last message, and fails on "fail".
func echoAnswer(req *model.Request) (string, error) {
	last := req.Messages[len(req.Messages)-1].Text()
	if last == "fail" {
		return "", errors.New("the model broke")
	}
	return "you said: " + last, nil
}

// testRuntime returns a runtime on a memory broker and store, closed when
// the test ends.
func testRuntime(t *testing.T) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	return agent.NewRuntime(c, st, nil)
}

// serveAgent serves a on rt, with an event log recording when logged, on
// a test HTTP server with opts.
func serveAgent[Out any](t *testing.T, rt *agent.Runtime, a *agent.Agent[Out], logged bool, opts *server.Options) (*httptest.Server, *eventlog.Log) {
	t.Helper()
	return serveAgentThrough(t, rt, a, logged, opts, nil)
}

// serveAgentThrough is serveAgent with the server's handler wrapped by
// wrap, when not nil.
func serveAgentThrough[Out any](t *testing.T, rt *agent.Runtime, a *agent.Agent[Out], logged bool, opts *server.Options, wrap func(http.Handler) http.Handler) (*httptest.Server, *eventlog.Log) {
	t.Helper()
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	var o server.Options
	if opts != nil {
		o = *opts
	}
	if logged {
		o.Log = eventlog.New(rt.Client(), rt.Store())
		if err := o.Log.Record(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	s, err := server.New(rt, []runner.Runner{runner.Agent(a)}, &o)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs, o.Log
}

// newServer serves one agent, "echo", on a memory runtime, with opts.
func newServer(t *testing.T, opts *server.Options) (*httptest.Server, *wordModel, *agent.Runtime) {
	t.Helper()
	rt := testRuntime(t)
	m := &wordModel{answer: echoAnswer}
	a := agent.Must(agent.New("echo", m, &agent.Options{Description: "Echoes."}))
	hs, _ := serveAgent(t, rt, a, false, opts)
	return hs, m, rt
}

// do sends a request and returns the status and the body.
func do(t *testing.T, method, url, token, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

// events reads server-sent events: each event's name and data.
func events(t *testing.T, body string) (names []string, data []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			names = append(names, name)
			data = append(data, strings.TrimPrefix(line, "data: "))
			name = ""
		}
	}
	return names, data
}

func TestModelsList(t *testing.T) {
	hs, _, _ := newServer(t, nil)
	status, body, _ := do(t, "GET", hs.URL+"/v1/models", "", "", nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "echo" || list.Data[0].Object != "model" {
		t.Errorf("models %s", body)
	}
}

func TestChatCompletions(t *testing.T) {
	hs, m, _ := newServer(t, nil)
	// Stateless: the messages are the conversation.
	status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","temperature":0.2,"messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"my name is Ada"},
		{"role":"assistant","content":"hello Ada"},
		{"role":"user","content":[{"type":"text","text":"who "},{"type":"text","text":"am I?"}]}]}`, nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var cc struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &cc); err != nil {
		t.Fatal(err)
	}
	if cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "you said: who am I?" || cc.Choices[0].FinishReason != "stop" || cc.Choices[0].Message.Role != "assistant" {
		t.Errorf("completion %s", body)
	}
	if cc.Usage.PromptTokens != 10 || cc.Usage.CompletionTokens != 5 || cc.Usage.TotalTokens != 15 {
		t.Errorf("usage %+v", cc.Usage)
	}
	if run := h.Get(server.RunHeader); run == "" || cc.ID != "chatcmpl-"+run {
		t.Errorf("run header %q, id %q", run, cc.ID)
	}
	if got := m.lastSeen(); !strings.Contains(got, "system:be brief|user:my name is Ada|assistant:hello Ada|user:who am I?") {
		t.Errorf("the model saw %q", got)
	}

	// Streaming: the text in word deltas, a stop, the usage, [DONE].
	status, body, _ = do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three"}]}`, nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	_, data := events(t, body)
	if len(data) < 5 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("events %q", data)
	}
	var text strings.Builder
	var finish string
	var usage int
	for _, d := range data[:len(data)-1] {
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("chunk object %q", ch.Object)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.TotalTokens
		}
	}
	if text.String() != "you said: one two three" || finish != "stop" || usage != 15 {
		t.Errorf("streamed %q, finish %q, usage %d", text.String(), finish, usage)
	}
	// Deltas came as the model wrote them, not as one piece.
	if len(data) < 7 {
		t.Errorf("only %d events: the text was not streamed", len(data))
	}
}

func TestChatInSession(t *testing.T) {
	hs, m, rt := newServer(t, nil)
	hdr := map[string]string{server.SessionHeader: "s-1"}
	for _, msg := range []string{"first", "second"} {
		status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","messages":[{"role":"user","content":"ignored"},{"role":"user","content":"`+msg+`"}]}`, hdr)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	// The session holds the history; the client's earlier messages are not
	// added to it.
	if got := m.lastSeen(); !strings.Contains(got, "user:first|assistant:you said: first|user:second") || strings.Contains(got, "ignored") {
		t.Errorf("the model saw %q", got)
	}
	info, err := session.LoadInfo(t.Context(), rt.Store(), "s-1")
	if err != nil || info.Runs != 2 {
		t.Errorf("session: %+v, %v", info, err)
	}
}

func TestResponses(t *testing.T) {
	hs, m, _ := newServer(t, nil)
	status, body, _ := do(t, "POST", hs.URL+"/v1/responses", "", `{"model":"echo","instructions":"be brief","input":"hello there"}`, nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var r struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "response" || r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Content[0].Text != "you said: hello there" || r.Usage.InputTokens != 10 {
		t.Errorf("response %s", body)
	}
	if got := m.lastSeen(); !strings.Contains(got, "system:be brief|user:hello there") {
		t.Errorf("the model saw %q", got)
	}

	status, body, _ = do(t, "POST", hs.URL+"/v1/responses", "", `{"model":"echo","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"a b c"}]}]}`, nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	names, data := events(t, body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	if len(names) < len(want)+4 {
		t.Fatalf("events %q", names)
	}
	for i, w := range want {
		if names[i] != w {
			t.Fatalf("event %d is %q, want %q (all: %q)", i, names[i], w, names)
		}
	}
	if tail := names[len(names)-4:]; strings.Join(tail, ",") != "response.output_text.done,response.content_part.done,response.output_item.done,response.completed" {
		t.Errorf("last events %q", tail)
	}
	var deltas strings.Builder
	for i, d := range data {
		var ev struct {
			Type     string `json:"type"`
			Sequence int    `json:"sequence_number"`
			Delta    string `json:"delta"`
			Text     string `json:"text"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != names[i] || ev.Sequence != i {
			t.Errorf("event %d: type %q sequence %d", i, ev.Type, ev.Sequence)
		}
		deltas.WriteString(ev.Delta)
		if ev.Type == "response.output_text.done" && ev.Text != "you said: a b c" {
			t.Errorf("done text %q", ev.Text)
		}
	}
	if deltas.String() != "you said: a b c" {
		t.Errorf("deltas %q", deltas.String())
	}
}

// A run that fails is an error: a 500 with the reason, or an error event
// in a stream.
func TestRunFailure(t *testing.T) {
	hs, _, _ := newServer(t, nil)
	status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","messages":[{"role":"user","content":"fail"}]}`, nil)
	if status != 500 || !strings.Contains(body, "the model broke") || !strings.Contains(body, `"code":"run_failed"`) {
		t.Errorf("failed run: %d %s", status, body)
	}
	status, body, _ = do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","stream":true,"messages":[{"role":"user","content":"fail"}]}`, nil)
	if _, data := events(t, body); status != 200 || len(data) == 0 || !strings.Contains(data[len(data)-1], `"error"`) || !strings.Contains(data[len(data)-1], "the model broke") {
		t.Errorf("failed streamed run: %d %s", status, body)
	}
	status, body, _ = do(t, "POST", hs.URL+"/v1/responses", "", `{"model":"echo","stream":true,"input":"fail"}`, nil)
	if names, _ := events(t, body); status != 200 || len(names) == 0 || names[len(names)-1] != "response.failed" || !strings.Contains(body, "the model broke") {
		t.Errorf("failed streamed response: %d %s", status, body)
	}
}

// Hostile and malformed requests get clear errors in the API's shape.
func TestBadRequests(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{MaxBodyBytes: 4096})
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		says                     string
	}{
		{"malformed chat", "POST", "/v1/chat/completions", `{"model":`, nil, 400, "not a valid JSON"},
		{"malformed responses", "POST", "/v1/responses", `[1,2`, nil, 400, "not a valid JSON"},
		{"not an object", "POST", "/v1/chat/completions", `"hi"`, nil, 400, "not a valid JSON"},
		{"trailing data", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"x"}]} {}`, nil, 400, "after its JSON"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, nil, 404, "model_not_found"},
		{"no model", "POST", "/v1/responses", `{"input":"x"}`, nil, 400, "names no model"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"echo","messages":[]}`, nil, 400, "no messages"},
		{"last not user", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`, nil, 400, "last message must be the user's"},
		{"client tools", "POST", "/v1/chat/completions", `{"model":"echo","tools":[{"type":"function","function":{"name":"rm"}}],"messages":[{"role":"user","content":"x"}]}`, nil, 400, "tools are the agent's own"},
		{"tool message", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"x"}]}`, nil, 400, "tool calls are the agent's own"},
		{"image part", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]}`, nil, 400, "image_url"},
		{"bad input", "POST", "/v1/responses", `{"model":"echo","input":42}`, nil, 400, "input is a string or an array"},
		{"previous response", "POST", "/v1/responses", `{"model":"echo","input":"x","previous_response_id":"resp_1"}`, nil, 400, "previous_response_id"},
		{"n 2", "POST", "/v1/chat/completions", `{"model":"echo","n":2,"messages":[{"role":"user","content":"x"}]}`, nil, 400, "n must be 1"},
		{"oversized", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"` + strings.Repeat("a", 5000) + `"}]}`, nil, 413, "over 4096 bytes"},
		{"bad session id", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"x"}]}`, map[string]string{server.SessionHeader: "../../etc/passwd"}, 400, "Calf-Session-Id"},
		{"unknown endpoint", "POST", "/v1/embeddings", `{}`, nil, 404, "no endpoint"},
		{"wrong method", "GET", "/v1/chat/completions", ``, nil, 405, "takes POST"},
		{"foreign host", "GET", "/v1/models", ``, map[string]string{"Host": "evil.example"}, 403, "loopback host"},
		{"cross-origin", "POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"x"}]}`, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, "cross-origin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := do(t, c.method, hs.URL+c.path, "", c.body, c.header)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Errorf("got %d %s, want %d with %q", status, body, c.status, c.says)
			}
			if !strings.Contains(body, `"error"`) {
				t.Errorf("not an error object: %s", body)
			}
		})
	}
}

// With tokens: a request needs one, and a session belongs to its user.
func TestTokensAndSessionOwners(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{Tokens: map[string]string{"tok-ann": "ann", "tok-bob": "bob"}})
	chat := `{"model":"echo","messages":[{"role":"user","content":"x"}]}`
	for _, tok := range []string{"", "tok-eve", "tok-ann2", "tok-an"} {
		if status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", tok, chat, nil); status != 401 || !strings.Contains(body, "bearer token") || h.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %s", tok, status, body)
		}
	}
	if status, body, _ := do(t, "GET", hs.URL+"/v1/models", "tok-bob", "", nil); status != 200 {
		t.Errorf("models with a token: %d %s", status, body)
	}
	ann := map[string]string{server.SessionHeader: "ann-1"}
	if status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "tok-ann", chat, ann); status != 200 {
		t.Fatalf("ann's session: %d %s", status, body)
	}
	// Bob can neither continue nor stream into ann's session.
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := chat
		if path == "/v1/responses" {
			body = `{"model":"echo","input":"x","stream":true}`
		}
		if status, got, _ := do(t, "POST", hs.URL+path, "tok-bob", body, ann); status != 404 || !strings.Contains(got, "no such session or run") {
			t.Errorf("bob in ann's session on %s: %d %s", path, status, got)
		}
	}
	if status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "tok-ann", chat, ann); status != 200 {
		t.Errorf("ann again: %d %s", status, body)
	}
	// A server with tokens answers any Host (it authenticates instead).
	if status, body, _ := do(t, "GET", hs.URL+"/v1/models", "tok-ann", "", map[string]string{"Host": "calf.internal"}); status != 200 {
		t.Errorf("a named host with a token: %d %s", status, body)
	}
}

func TestRateLimit(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{RateLimit: 0.001, RateBurst: 3})
	var codes []int
	for range 5 {
		status, _, h := do(t, "GET", hs.URL+"/v1/models", "", "", nil)
		codes = append(codes, status)
		if status == 429 && h.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if codes[0] != 200 || codes[2] != 200 || codes[3] != 429 || codes[4] != 429 {
		t.Errorf("statuses %v", codes)
	}
}

func TestListenChecks(t *testing.T) {
	if err := server.CheckAddr("0.0.0.0:8420", nil); err == nil || !strings.Contains(err.Error(), "beyond loopback") {
		t.Errorf("0.0.0.0 without tokens: %v", err)
	}
	if err := server.CheckAddr("0.0.0.0:8420", map[string]string{"t": "u"}); err != nil {
		t.Errorf("0.0.0.0 with tokens: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if err := server.CheckAddr(addr, nil); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if _, err := server.New(nil, nil, nil); err == nil {
		t.Error("New without a runtime")
	}
}

// A client that goes away cancels its run, whether the run is the
// request's own or followed in the event log.
func TestDisconnectCancelsRun(t *testing.T) {
	for _, logged := range []bool{false, true} {
		t.Run(map[bool]string{false: "own", true: "logged"}[logged], func(t *testing.T) { testDisconnectCancelsRun(t, logged) })
	}
}

func testDisconnectCancelsRun(t *testing.T, logged bool) {
	rt := testRuntime(t)
	st := rt.Store()
	started := make(chan struct{}, 1)
	m := modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	hs, _ := serveAgent(t, rt, agent.Must(agent.New("slow", m, nil)), logged, nil)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(`{"model":"slow","messages":[{"role":"user","content":"x"}]}`))
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := http.DefaultClient.Do(req)
		done <- resp
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not start")
	}
	cancel()
	<-done
	// The run ends cancelled.
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := st.List(t.Context(), store.KindRun, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var status agent.RunStatus
		if len(recs) == 1 {
			run, err := rt.LoadAgentRun(t.Context(), recs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			status = run.Status
		}
		if status == agent.RunCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs, status %q", len(recs), status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A streamed answer read from the event log reports the usage the model
// reported, as a non-streamed one does: chat completions in the usage
// chunk, the Responses API in response.completed.
func TestStreamedUsage(t *testing.T) {
	rt := testRuntime(t)
	a := agent.Must(agent.New("echo", &wordModel{answer: echoAnswer}, nil))
	hs, _ := serveAgent(t, rt, a, true, nil)
	// "you said: one two three": 10 tokens in, 5 out.
	status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three"}]}`, nil)
	_, data := events(t, body)
	if status != 200 || len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("chat: %d %s", status, body)
	}
	var chunk struct {
		Choices []any `json:"choices"`
		Usage   *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			TotalTokens      int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(data[len(data)-2]), &chunk); err != nil || chunk.Usage == nil || len(chunk.Choices) != 0 {
		t.Fatalf("the usage chunk %s: %v", data[len(data)-2], err)
	}
	if u := *chunk.Usage; u.PromptTokens != 10 || u.CompletionTokens != 5 || u.TotalTokens != 15 {
		t.Errorf("chat usage %+v, want 10 + 5 = 15", u)
	}

	// Not streamed, the run followed in the log all the same.
	status, body, _ = do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","messages":[{"role":"user","content":"one two three"}]}`, nil)
	var cc struct {
		Usage struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &cc); err != nil || status != 200 || cc.Usage.TotalTokens != 15 {
		t.Errorf("chat, not streamed: %d %s", status, body)
	}

	status, body, _ = do(t, "POST", hs.URL+"/v1/responses", "", `{"model":"echo","stream":true,"input":"one two three"}`, nil)
	names, data := events(t, body)
	if status != 200 || len(names) == 0 || names[len(names)-1] != "response.completed" {
		t.Fatalf("responses: %d %s", status, body)
	}
	var done struct {
		Response struct {
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
				TotalTokens  int64 `json:"total_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(data[len(data)-1]), &done); err != nil {
		t.Fatal(err)
	}
	if u := done.Response.Usage; u.InputTokens != 10 || u.OutputTokens != 5 || u.TotalTokens != 15 {
		t.Errorf("responses usage %+v, want 10 + 5 = 15", u)
	}
}
