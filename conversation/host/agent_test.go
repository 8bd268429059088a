package host_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// An LLM prototype run as an agent on its own: its system prompt reaches
// the model.
func ExampleNewAgent() {
	ps, err := conversation.Parse([]byte(`prototypes:
  - name: poet
    role: Writes short poems
    system_prompt: Answer in one line of verse.
    model: openai:gpt-4.1-mini
`))
	if err != nil {
		panic(err)
	}
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("system prompt: " + req.Messages[0].Text()), nil
	})
	a, err := host.NewAgent(ps[0], &host.AgentOptions{
		Model: func(string) (model.Model, error) { return m, nil },
	})
	if err != nil {
		panic(err)
	}
	out, err := a.Run(context.Background(), local.Runtime(), "the sea", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Name())
	fmt.Println(out.Output)
	// Output:
	// poet
	// system prompt: Answer in one line of verse.
}

func TestNewAgent(t *testing.T) {
	p := conversation.Prototype{Name: "reader", Role: "Reads", SystemPrompt: "Read.", Model: "openai:m", Tools: []string{"read_file"},
		Permissions: &conversation.Permissions{Mode: "accept_reads", Disallowed: []string{"bash"}}}
	var opened []string
	open := func(name string) (model.Model, error) {
		opened = append(opened, name)
		return modeltest.NewTestModel(modeltest.Text("ok")), nil
	}
	t.Run("file tools need a root", func(t *testing.T) {
		_, err := host.NewAgent(p, &host.AgentOptions{Model: open})
		if err == nil || !strings.Contains(err.Error(), "read_file") {
			t.Fatalf("NewAgent without a root = %v, want an error naming read_file", err)
		}
	})
	t.Run("root", func(t *testing.T) {
		opened = nil
		extra, err := tool.New("extra", "An extra tool.", func(context.Context, struct{}) (string, error) { return "", nil })
		if err != nil {
			t.Fatal(err)
		}
		a, err := host.NewAgent(p, &host.AgentOptions{Name: "x-reader", Model: open, Root: t.TempDir(),
			ExtraTools: []tool.Tool{extra}, Instructions: "More."})
		if err != nil {
			t.Fatal(err)
		}
		if a.Name() != "x-reader" || !slices.Equal(opened, []string{"openai:m"}) {
			t.Errorf("agent %s, models opened %q", a.Name(), opened)
		}
	})
	t.Run("no model opener", func(t *testing.T) {
		_, err := host.NewAgent(conversation.Prototype{Name: "m"}, &host.AgentOptions{})
		if err == nil || !strings.Contains(err.Error(), "no model opener") {
			t.Fatalf("NewAgent without AgentOptions.Model = %v, want an error naming it", err)
		}
	})
	t.Run("code prototype", func(t *testing.T) {
		_, err := host.NewAgent(conversation.Prototype{Name: "code", Kind: conversation.KindCode}, nil)
		if err == nil {
			t.Fatal("NewAgent of a code prototype succeeded")
		}
	})
	t.Run("MCP servers", func(t *testing.T) {
		q := conversation.Prototype{Name: "m", MCPServers: []conversation.MCPServer{{Name: "files", Command: []string{"srv"}}}}
		if _, err := host.NewAgent(q, &host.AgentOptions{Model: open}); err == nil {
			t.Fatal("NewAgent with MCP servers and no AgentOptions.MCP succeeded")
		}
		boom := errors.New("boom")
		_, err := host.NewAgent(q, &host.AgentOptions{Model: open, MCP: func(conversation.MCPServer) (tool.Toolset, error) { return nil, boom }})
		if !errors.Is(err, boom) {
			t.Fatalf("NewAgent = %v, want the MCP error", err)
		}
	})
}

// TestFlowControlOfPrototype makes an agent's flow control from a
// prototype's data form: the key, the rate and the debounce parsed.
func TestFlowControlOfPrototype(t *testing.T) {
	fc, err := host.FlowControl(&conversation.PrototypeFlow{Key: "first_word", Concurrency: 2, MaxRunning: 8, Rate: "30/1m", Burst: 1, Debounce: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if fc.Concurrency != 2 || fc.Rate != 30 || fc.Per != time.Minute || fc.Burst != 1 || fc.Debounce != 2*time.Second || fc.MaxRunning != 8 {
		t.Fatalf("flow control %+v", fc)
	}
	for prompt, want := range map[string]string{"acme: do it": "acme", "  globex rest": "globex", "": ""} {
		if got := fc.Key(agent.FlowInput{Prompt: prompt}); got != want {
			t.Errorf("key of %q: %q, want %q", prompt, got, want)
		}
	}
	fc, err = host.FlowControl(&conversation.PrototypeFlow{Key: "session"})
	if err != nil || fc.Key(agent.FlowInput{SessionID: "s1", Prompt: "x y"}) != "s1" {
		t.Fatalf("session key: %v", err)
	}
	if _, err := host.FlowControl(&conversation.PrototypeFlow{Rate: "5"}); err == nil {
		t.Fatal("a rate without a period was taken")
	}
}
