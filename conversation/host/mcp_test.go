package host_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// echoModel calls the echo tool of the MCP server "ev" (the reference
// server-everything's) with the user's message, then answers with what
// it returned.
func echoModel() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		if res, ok := toolResult(req, "call_echo"); ok {
			return modeltest.Text("the server said: " + res), nil
		}
		for _, d := range req.Tools {
			if d.Name == "ev__echo" {
				return modeltest.ToolCalls(modeltest.Call("call_echo", "ev__echo", `{"message":"`+lastUser(req)+`"}`)), nil
			}
		}
		return modeltest.Text("no echo tool offered"), nil
	}
}

// mcpOpener opens the MCP servers of prototypes with package mcp, as the
// command line does, counting them.
func mcpOpener(n *atomic.Int32) func(conversation.MCPServer) (tool.Toolset, error) {
	return func(s conversation.MCPServer) (tool.Toolset, error) {
		n.Add(1)
		return mcp.New(mcp.Config{Name: s.Name, Command: s.Command[0], Args: s.Command[1:], URL: s.URL})
	}
}

// TestHostMCP: an LLM prototype that lists an MCP server is served with
// the server's tools when Options.MCP connects them: the model calls
// the server's echo tool in a conversation, through the hooks of
// Options.Agent, and the user gets the answer. Without an opener, the
// messages for its instances are refused with the reason.
func TestHostMCP(t *testing.T) {
	server := []string{peers.Node(t), peers.Package(t, "@modelcontextprotocol/server-everything/dist/index.js")}
	proto := conversation.Prototype{Name: "mcp-agent", Role: "Echoes", SystemPrompt: "Use the echo tool.",
		MCPServers: []conversation.MCPServer{{Name: "ev", Command: server}}}
	start := func(t *testing.T, opts *host.Options) (*hostEnv, conversation.Conversation) {
		st := storemem.New()
		e := newHost(t, memory.New(nil), st, echoModel(), opts)
		if err := e.convs.Prototypes().Register(t.Context(), proto, false); err != nil {
			t.Fatal(err)
		}
		c, err := conversation.NewConversations(st, &conversation.Options{Entry: proto.Name}).Create(t.Context(), conversation.NewConversation{UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		return e, c
	}

	t.Run("served", func(t *testing.T) {
		var opened atomic.Int32
		var mu sync.Mutex
		var hooked []string
		hook := agent.Hook{Name: "seen", Event: agent.HookPreToolUse, Func: func(_ context.Context, in agent.HookInput) (agent.HookDecision, error) {
			mu.Lock()
			hooked = append(hooked, in.ToolName)
			mu.Unlock()
			return agent.HookDecision{}, nil
		}}
		e, c := start(t, &host.Options{MCP: mcpOpener(&opened), Agent: &agent.Options{Hooks: []agent.Hook{hook}}})
		e.say(c, "hello from the user")
		got := e.wait(c, 1)[0]
		if got.Message != "the server said: Echo: hello from the user" || got.AgentID != c.Entry {
			t.Fatalf("answer %+v", got)
		}
		e.say(c, "again")
		if got := e.wait(c, 2)[1]; got.Message != "the server said: Echo: again" {
			t.Fatalf("second answer %+v", got)
		}
		// One agent for the prototype, one toolset for its server.
		if n := opened.Load(); n != 1 {
			t.Errorf("the opener was called %d times, want 1", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(hooked, ",") != "ev__echo,ev__echo" {
			t.Errorf("the hook of Options.Agent saw %q, want both echo calls", hooked)
		}
	})

	t.Run("no opener", func(t *testing.T) {
		e, c := start(t, nil)
		e.say(c, "hello")
		got := e.wait(c, 1)[0]
		if !strings.HasPrefix(got.Message, convid.ErrorPrefix+c.Entry+" cannot be served: ") || !strings.Contains(got.Message, "MCP servers") {
			t.Fatalf("answer %+v, want a refusal naming the MCP servers", got)
		}
	})
}
