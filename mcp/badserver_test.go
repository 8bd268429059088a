package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// TestMain runs this test binary as a fake MCP server when asked to.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CALF_FAKE_MCP"); mode != "" {
		fakeServer(mode)
		os.Exit(0)
	}
	if scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO"); scenario != "" && os.Getenv("CALF_CONFORMANCE_CLIENT") != "" {
		if err := conformanceClient(scenario, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintf(os.Stderr, "scenario %s: %v\n", scenario, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeServer speaks just enough MCP over stdio to misbehave: "garbage"
// answers with what is not JSON-RPC; "odd" lists a tool whose schema is
// not an object, returns an oversized result, and announces a new tool
// after the first call.
func fakeServer(mode string) {
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		data, _ := json.Marshal(v)
		out.Write(data)
		out.WriteByte('\n')
		out.Flush()
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	calls := 0
	for in.Scan() {
		if mode == "garbage" {
			fmt.Fprintln(out, "this is not JSON-RPC {")
			out.Flush()
			continue
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string `json:"name"`
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue // a notification
		}
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}) }
		switch req.Method {
		case "initialize":
			reply(map[string]any{
				"protocolVersion": req.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo":      map[string]any{"name": "odd", "version": "1"},
			})
		case "tools/list":
			obj := map[string]any{"type": "object", "properties": map[string]any{}}
			tools := []any{
				map[string]any{"name": "good", "description": "Works.", "inputSchema": obj},
				map[string]any{"name": "big", "description": "Too much.", "inputSchema": obj},
				map[string]any{"name": "stringy", "description": "Bad schema.", "inputSchema": map[string]any{"type": "string"}},
			}
			if calls > 0 {
				tools = append(tools, map[string]any{"name": "added.later", "description": "New.", "inputSchema": obj})
			}
			reply(map[string]any{"tools": tools})
		case "tools/call":
			calls++
			text := "ok"
			if req.Params.Name == "big" {
				text = strings.Repeat("x", 2<<20)
			}
			reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
			if calls == 1 {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
			}
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no such method"}})
		}
	}
}

func fake(t *testing.T, mode string) *mcp.Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcp.New(mcp.Config{Name: "odd", Command: exe, Env: []string{"CALF_FAKE_MCP=" + mode}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(t *testing.T, tools []tool.Tool, name string) (*tool.Result, error) {
	t.Helper()
	for _, tl := range tools {
		if tl.Definition().Name == name {
			return tl.Call(t.Context(), json.RawMessage(`{}`))
		}
	}
	t.Fatalf("no tool %s", name)
	return nil, nil
}

// A server that answers with what is not JSON-RPC: a clear error, soon,
// and no tools.
func TestServerSpeaksGarbage(t *testing.T) {
	c := fake(t, "garbage")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tools, err := c.Tools(ctx)
	if err == nil || len(tools) != 0 || ctx.Err() != nil || !strings.Contains(err.Error(), "odd") {
		t.Fatalf("tools %d, err %v; want an error naming the server, before the deadline", len(tools), err)
	}
	t.Logf("error: %v", err)
	// Asked again at once, it waits out the restart pause, and says so.
	if _, err := c.Tools(ctx); err == nil {
		t.Error("a second listing succeeded")
	}
}

// A tool whose schema is not an object is left out, with an error that
// names it; the others are offered. An oversized result is an error; a
// list_changed notification brings the new tool in, its name made valid.
func TestServerOddities(t *testing.T) {
	c := fake(t, "odd")
	tools, err := c.Tools(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"stringy"`) || !strings.Contains(err.Error(), "not a JSON object schema") {
		t.Errorf("err %v; want one naming the tool with a bad schema", err)
	}
	if got := names(tools); len(got) != 2 || got["odd__good"] != tool.KindExecute || got["odd__big"] == "" {
		t.Fatalf("tools %v; want good and big, of kind execute (no annotations)", got)
	}
	res, err := call(t, tools, "odd__big")
	if err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("oversized result: %v, %v", res, err)
	}
	res, err = call(t, tools, "odd__good")
	if err != nil || res.Text() != "ok" {
		t.Fatalf("good: %v, %v", res, err)
	}
	// The notification follows the first call: the list is made again.
	testwait.ForErr(t, 10*time.Second, "the tool added later", func() error {
		tools, _ = c.Tools(t.Context())
		if _, ok := names(tools)["odd__added_later"]; !ok {
			return fmt.Errorf("tools after list_changed: %v", names(tools))
		}
		return nil
	})
	if err := c.Close(); err != nil {
		t.Log(err)
	}
	if _, err := c.Tools(t.Context()); err == nil {
		t.Error("a closed client listed tools")
	}
	_, err = call(t, tools, "odd__good")
	if !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("a call on a closed client: %v", err)
	}
}

// An MCP tool's call goes through the agent's permissions like any tool's:
// a tool without annotations is of kind execute, which accept_edits asks a
// person about, and a hook sees its call.
func TestMCPToolUnderPermissionsAndHooks(t *testing.T) {
	c := fake(t, "odd")
	rt := newRuntime(t)
	ctx := runCtx(t)
	var hooked []string
	hook := agent.Hook{Name: "audit", Event: agent.HookPreToolUse, Matcher: "odd__*",
		Func: func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			hooked = append(hooked, in.ToolName+":"+string(in.ToolKind))
			return agent.HookDecision{Action: agent.HookAllow}, nil
		}}
	s := &script{turns: [][]model.ToolCall{{modeltest.Call("c1", "odd__good", `{}`)}}}
	a := agent.Must(agent.New("guarded", s.model(), &agent.Options{
		Toolsets:    []tool.Toolset{c},
		Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits},
		Hooks:       []agent.Hook{hook},
	}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	for ev, err := range a.RunStream(ctx, rt, "call it", &agent.RunOptions{RunID: "p"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
			if ev.Approval.ToolName != "odd__good" {
				t.Errorf("approval asked for %s", ev.Approval.ToolName)
			}
			if _, err := approval.Respond(ctx, rt.Store(), rt.Client(), ev.Approval.ID, approval.Answer{Approve: true, Digest: ev.Approval.Digest}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := s.results(); len(got) != 1 || got[0].Text() != "ok" {
		t.Errorf("results %v; want the approved call's", got)
	}
	if strings.Join(hooked, ",") != "odd__good:execute" {
		t.Errorf("hook saw %v", hooked)
	}
}
