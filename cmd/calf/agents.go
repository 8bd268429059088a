package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// registerAgents registers --agents FILE and --root DIR, and with pick
// --agent NAME, the prototype to run (calf worker has a --agent of its
// own, the agents to serve).
func (f *agentFlags) registerAgents(fl *pflag.FlagSet, pick bool) {
	fl.StringVar(&f.agentsFile, "agents", "", "serve the agents of a prototypes `FILE` (YAML, docs/conversations.md) instead of the built-in assistant")
	fl.StringVar(&f.root, "root", "", "with --agents, the `DIR` the prototypes' file tools and bash work in")
	if pick {
		fl.StringVar(&f.pick, "agent", "", "with --agents, the prototype to run, by `NAME` (default: the file's first llm prototype)")
	}
}

// builtinFlags are the agent flags that make the built-in assistant, which
// a prototypes file says for itself.
var builtinFlags = []struct {
	name string
	set  func(f *agentFlags) bool
}{
	{"system", func(f *agentFlags) bool { return f.system != defaultInstructions }},
	{"read", func(f *agentFlags) bool { return f.read != "" }},
	{"edit", func(f *agentFlags) bool { return f.edit != "" }},
	{"bash", func(f *agentFlags) bool { return f.bash != "" }},
	{"web", func(f *agentFlags) bool { return f.web }},
	{"mode", func(f *agentFlags) bool { return f.mode != "" }},
}

// loadAgents reads and checks the prototypes of --agents, and refuses the
// flags that only the built-in assistant takes. A file with problems is a
// usage error listing every one with its line.
func (f *agentFlags) loadAgents() ([]conversation.Prototype, error) {
	for _, b := range builtinFlags {
		if b.set(f) {
			return nil, usageError(fmt.Errorf("--%s configures the built-in assistant; with --agents the prototypes file says "+
				"each agent's system prompt, tools and permissions", b.name))
		}
	}
	ps, err := conversation.LoadFile(f.agentsFile)
	if err != nil {
		return nil, usageError(fmt.Errorf("--agents: %w", err))
	}
	return ps, nil
}

// llmNames returns the names of the llm prototypes of ps.
func llmNames(ps []conversation.Prototype) []string {
	var names []string
	for _, p := range ps {
		if kindOf(p) == conversation.KindLLM {
			names = append(names, p.Name)
		}
	}
	return names
}

// pickPrototype returns the llm prototype of ps named name, or the first
// one when name is empty.
func pickPrototype(ps []conversation.Prototype, name string) (conversation.Prototype, error) {
	names := llmNames(ps)
	if len(names) == 0 {
		return conversation.Prototype{}, usageError(errors.New("--agents: the file has no llm prototype, the only kind run as an agent"))
	}
	if name == "" {
		name = names[0]
	}
	i := slices.IndexFunc(ps, func(p conversation.Prototype) bool { return p.Name == name })
	if i < 0 || kindOf(ps[i]) != conversation.KindLLM {
		return conversation.Prototype{}, usageError(fmt.Errorf("--agent %q: the --agents file has no llm prototype of that name (it has %s)",
			name, strings.Join(names, ", ")))
	}
	return ps[i], nil
}

// openModel returns how the model of a prototype is opened: by its name as
// --model takes it, the prototypes without a model getting --model's
// (else $CALF_MODEL's, else the default).
func (f *agentFlags) openModel(ctx context.Context, getenv func(string) string) func(name string) (model.Model, error) {
	return func(name string) (model.Model, error) {
		if f.replay != nil {
			return f.replay, nil
		}
		if name == "" {
			name = f.model
		}
		choice, err := selectModel(ctx, name, getenv, http.DefaultClient)
		if err != nil {
			return nil, err
		}
		return newModel(choice)
	}
}

// mcpToolset returns the toolset of a prototype's MCP server, connected
// when the agent is served.
func mcpToolset(s conversation.MCPServer) (tool.Toolset, error) {
	cfg := mcp.Config{Name: s.Name, URL: s.URL}
	if len(s.Command) > 0 {
		cfg.Command, cfg.Args = s.Command[0], s.Command[1:]
	}
	return mcp.New(cfg)
}

// prototypeAgent makes the agent of the llm prototype p with the agent
// flags that apply to every agent: --max-turns, --timeout, --hook, --mcp
// and --model for the prototypes that name no model. With serve false
// the agent only starts runs and follows them: it needs no model.
func (f *agentFlags) prototypeAgent(ctx context.Context, p conversation.Prototype, getenv func(string) string, serve bool) (*agent.Agent[string], error) {
	for _, t := range p.Tools {
		if serve && f.root == "" && t != "web_fetch" && t != "web_search" {
			return nil, usageError(fmt.Errorf("--agents: prototype %s has the tool %s: give the directory it works in with --root DIR", p.Name, t))
		}
	}
	if !serve {
		a, err := agent.New(p.Name, remoteModel{}, &agent.Options{Description: p.Role, MaxTurns: f.maxTurns, Timeout: f.timeout})
		return a, failure(err)
	}
	hooks, err := f.commandHooks()
	if err != nil {
		return nil, err
	}
	servers, err := f.mcpServers()
	if err != nil {
		return nil, err
	}
	a, err := host.NewAgent(p, &host.AgentOptions{
		Model: f.openModel(ctx, getenv), Root: f.root, MCP: mcpToolset,
		Agent: &agent.Options{MaxTurns: f.maxTurns, Timeout: f.timeout, Hooks: hooks, Toolsets: servers},
	})
	if err != nil {
		return nil, failure(fmt.Errorf("--agents: prototype %s: %w", p.Name, err))
	}
	return a, nil
}

// newHost makes the conversation host of calf worker --agents, calf serve
// --agents and the conversations served in the process of calf chat
// --conversation and calf conversations send: the prototypes protos
// registered in the runtime's store first (replacing those of the same
// names), then a host of the store's conversations whose agents take the
// agent-wide flags as the file's agents do (--model for the prototypes
// that name none, --root, --max-turns, --timeout, --hook, and the --mcp
// servers shared by all of them), with the prototypes' MCP servers on
// package mcp and docmem-agent served by package conversation/docmem.
// opts holds the host's other options (DeleteChannels, Concurrency,
// MaxAttempts).
func (f *agentFlags) newHost(ctx context.Context, rt *agent.Runtime, protos []conversation.Prototype, getenv func(string) string,
	opts host.Options) (*host.Host, error) {
	st := rt.Store()
	convs := conversation.NewConversations(st, nil)
	if len(protos) > 0 {
		if err := convs.Prototypes().RegisterAll(ctx, protos, true); err != nil {
			return nil, failure(err)
		}
	}
	hooks, err := f.commandHooks()
	if err != nil {
		return nil, err
	}
	servers, err := f.mcpServers()
	if err != nil {
		return nil, err
	}
	opts.Model, opts.Root, opts.MCP = f.openModel(context.WithoutCancel(ctx), getenv), f.root, mcpToolset
	opts.Agent = &agent.Options{MaxTurns: f.maxTurns, Timeout: f.timeout, Hooks: hooks, Toolsets: servers}
	opts.Code = map[string]host.CodeHandler{docmemPrototype: docmem.New(st, nil).CodeHandler()}
	// The terminal chat and the web chat show the answers as they come.
	opts.Stream = true
	return host.New(rt, convs, &opts), nil
}

// serveHost serves host until the runtime's client shuts down. On a
// broker inside this process (inProcess), which lost the messages a
// previous process left in flight, it then carries on the messages whose
// answers were in progress (Host.Recover); what cannot be carried on is
// reported on warn, and waits for a process that can.
func serveHost(ctx context.Context, host *host.Host, inProcess bool, warn io.Writer) error {
	sctx := context.WithoutCancel(ctx)
	if err := host.Serve(sctx); err != nil {
		return failure(err)
	}
	if !inProcess {
		return nil
	}
	if _, err := host.Recover(ctx); err != nil {
		if ctx.Err() != nil {
			return failure(err)
		}
		if warn == nil {
			warn = io.Discard
		}
		fmt.Fprintf(warn, "calf: warning: the messages left unanswered by a previous process: %v\n", err)
	}
	return nil
}
