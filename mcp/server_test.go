package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/tool"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// newServer serves, over streamable HTTP on loopback, a plain tool (add,
// kind read) and an agent (helper) that adds with that tool.
func newServer(t *testing.T, m model.Model, token string) (url string, rt *agent.Runtime) {
	t.Helper()
	rt = newRuntime(t)
	add := tool.Classify(tool.Must(tool.New("add", "Adds two integers.", func(ctx context.Context, in addIn) (int, error) {
		return in.A + in.B, nil
	})), tool.KindRead)
	helper := agent.Must(agent.New("helper", m, &agent.Options{
		Description: "Answers arithmetic questions.",
		Tools:       []tool.Tool{add},
	}))
	if err := helper.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(rt, &mcp.ServerOptions{Name: "calc"})
	if err := s.AddTool(add); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRunner(runner.Agent(helper)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTool(add); err == nil {
		t.Error("a second tool named add was accepted")
	}
	var h http.Handler = s.Handler(nil)
	if token != "" {
		h = mcp.BearerToken(h, token)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, rt
}

// helperModel adds the numbers of the prompt "a+b" with the add tool.
func helperModel() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("the sum is " + last.Text()), nil
		}
		a, b, _ := strings.Cut(last.Text(), "+")
		return modeltest.ToolCalls(modeltest.Call("c", "add", `{"a":`+a+`,"b":`+b+`}`)), nil
	}
}

// A Calf agent uses another Calf deployment's tool and agent through MCP:
// the plain tool runs in the server's process, the agent's call is a run
// on the server's runtime.
func TestServerRoundTrip(t *testing.T) {
	url, srvRT := newServer(t, helperModel(), "")
	c, err := mcp.New(mcp.Config{Name: "calc", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := runCtx(t)
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(tools); got["calc__add"] != tool.KindRead || got["calc__helper"] != tool.KindExecute {
		t.Fatalf("tools %v; want add (read) and helper (execute)", got)
	}
	s := &script{turns: [][]model.ToolCall{{
		modeltest.Call("t1", "calc__add", `{"a":2,"b":3}`),
		modeltest.Call("t2", "calc__helper", `{"prompt":"20+22"}`),
		modeltest.Call("t3", "calc__add", `{"a":"x"}`),
		modeltest.Call("t4", "calc__helper", `{"nope":1}`),
	}}}
	rt := newRuntime(t)
	caller := agent.Must(agent.New("caller", s.model(), &agent.Options{Toolsets: []tool.Toolset{c}}))
	if err := caller.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Run(ctx, rt, "compute", nil); err != nil {
		t.Fatal(err)
	}
	byID := map[string]model.Message{}
	for _, m := range s.results() {
		byID[m.ToolCallID] = m
	}
	if got := byID["t1"].Text(); got != "5" {
		t.Errorf("add: %q", got)
	}
	if got := byID["t2"].Text(); got != "the sum is 42" {
		t.Errorf("helper: %q", got)
	}
	if got := byID["t3"].Text(); !strings.Contains(got, "invalid arguments") {
		t.Errorf("add with bad arguments: %q", got)
	}
	if got := byID["t4"].Text(); !strings.Contains(got, "invalid arguments") {
		t.Errorf("helper with bad arguments: %q", got)
	}
	// The helper's run is a run of the server's runtime, in its store.
	recs, err := srvRT.Store().List(ctx, "run", "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Errorf("server runs: %d (%v); want the helper's one", len(recs), err)
	}
}

// A client that asks for progress gets the run's events as notifications;
// a client that cancels the call cancels the run.
func TestServerProgressAndCancel(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1].Text(); last == "wait" {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return modeltest.Text("too late"), nil
		}
		return helperModel()(ctx, req)
	})
	url, srvRT := newServer(t, m, "")
	ctx := runCtx(t)
	var mu sync.Mutex
	var progress []string
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "helper", Arguments: map[string]any{"prompt": "1+2"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != "the sum is 3" {
		t.Fatalf("result %+v", res)
	}
	// Notifications are handled apart from the response: wait for them.
	var got string
	testwait.ForErr(t, 10*time.Second, "the progress of the second model call", func() error {
		mu.Lock()
		got = strings.Join(progress, "; ")
		mu.Unlock()
		if !strings.Contains(got, "model call 2") {
			return fmt.Errorf("progress %q", got)
		}
		return nil
	})
	for _, want := range []string{"helper: model call 1", "helper: calling add", "helper: add returned (success)", "helper: model call 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress %q lacks %q", got, want)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "helper", Arguments: map[string]any{"prompt": "wait"}})
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the run did not start")
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled call returned no error")
	}
	// The run is cancelled in the server's store: the model call in
	// progress finishes, and the run takes no step after it.
	testwait.ForErr(t, 20*time.Second, "a run cancelled after the client cancelled its call", func() error {
		page, err := srvRT.Store().List(ctx, "run", "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range page {
			if strings.Contains(string(r.Data), `"status":"cancelled"`) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d runs cancelled of %d", n, len(page))
		}
		return nil
	})
}

// Over HTTP: a missing or wrong token is refused, as is a cross-origin
// browser request and malformed JSON; nothing reaches a tool.
func TestServerHTTPRefusals(t *testing.T) {
	url, _ := newServer(t, helperModel(), "s3cret")
	post := func(body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, tc := range map[string]struct {
		body string
		hdr  map[string]string
		want int
	}{
		"no token":     {init, nil, 401},
		"wrong token":  {init, map[string]string{"Authorization": "Bearer nope"}, 401},
		"foreign site": {init, map[string]string{"Authorization": "Bearer s3cret", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
		"bad JSON":     {`{"jsonrpc":`, map[string]string{"Authorization": "Bearer s3cret"}, 400},
		"good":         {init, map[string]string{"Authorization": "Bearer s3cret"}, 200},
	} {
		resp := post(tc.body, tc.hdr)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", name, resp.StatusCode, tc.want)
		}
		if tc.want == 401 && (resp.Header.Get("WWW-Authenticate") == "" || resp.Header.Get("Content-Type") != "application/json") {
			t.Errorf("%s: 401 with WWW-Authenticate %q, Content-Type %q; want a challenge and the JSON error body", name, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Content-Type"))
		}
	}
	// Our client passes the token as a header.
	c, err := mcp.New(mcp.Config{Name: "calc", URL: url, Headers: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tools, err := c.Tools(runCtx(t)); err != nil || len(tools) != 2 {
		t.Errorf("with the token: %d tools, %v", len(tools), err)
	}
}
