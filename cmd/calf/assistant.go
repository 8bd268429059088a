package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/commandhook"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// defaultInstructions is the --system default.
const defaultInstructions = "You are a helpful assistant. Answer clearly and concisely."

// agentName is the name of the agent calf run runs and calf worker serves.
const agentName = "assistant"

// agentFlags configure the assistant agent: calf run and calf worker
// share them, so that a worker serves the agent a caller runs.
type agentFlags struct {
	model    string
	system   string
	timeout  time.Duration
	maxTurns int
	read     string
	edit     string
	bash     string
	web      bool
	mode     string
	hooks    []string
	mcp      []string
	// agentsFile, root and pick are --agents, --root and --agent: the
	// agents of a prototypes file in place of the built-in assistant.
	agentsFile string
	root       string
	pick       string
	// replay, when set, is the model (a recording) in place of --model.
	replay model.Model
}

// agentFlagNames are the flags that configure the agent itself (not the
// caller's wait), which only a process that serves the agent uses.
var agentFlagNames = []string{"model", "system", "max-turns", "read", "edit", "bash", "web", "mode", "hook", "mcp", "root"}

func (f *agentFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.model, "model", "", "the model: openai:NAME, openai-responses:NAME, anthropic:NAME, gemini:NAME, ollama:NAME, a bare NAME, "+
		"or the base URL of an OpenAI-compatible server with an optional #NAME (default $"+envModel+", else "+defaultModel+")")
	fl.StringVar(&f.system, "system", defaultInstructions, "the agent's instructions (system prompt)")
	fl.DurationVar(&f.timeout, "timeout", agent.DefaultTimeout, "bound on the whole run")
	fl.IntVar(&f.maxTurns, "max-turns", agent.DefaultMaxTurns, "bound on the model calls of the run")
	fl.StringVar(&f.read, "read", "", "give the agent read-only file tools (read_file, list_dir, glob, grep) confined to `DIR`")
	fl.StringVar(&f.edit, "edit", "", "give the agent the file tools, editing included (also write_file, edit_file), confined to `DIR`")
	fl.StringVar(&f.bash, "bash", "", "give the agent the bash tool, running commands in `DIR` (in a bubblewrap sandbox where it is installed)")
	fl.BoolVar(&f.web, "web", false, "give the agent the web_fetch tool (public addresses only)")
	fl.StringVar(&f.mode, "mode", "", "the permission mode: ask, accept_reads, accept_edits or bypass; calls it does not accept wait for approval "+
		"(default accept_edits with --edit, --bash, --web or --mcp, else none)")
	fl.StringArrayVar(&f.hooks, "hook", nil, "run a command as a hook: `EVENT[:MATCHER]=COMMAND`, the command split at white space "+
		"(no shell); it reads the hook's input as JSON and prints its decision (repeatable; see docs/tools.md)")
	fl.StringArrayVar(&f.mcp, "mcp", nil, "give the agent an MCP server's tools, named NAME__TOOL: `NAME=COMMAND` (a server on standard input "+
		"and output, the command split at white space, no shell) or NAME=URL (streamable HTTP, http or https) (repeatable; see docs/protocols.md)")
}

// mcpServers returns the MCP servers that --mcp names, unconnected.
func (f *agentFlags) mcpServers() ([]tool.Toolset, error) {
	var sets []tool.Toolset
	for _, spec := range f.mcp {
		name, target, ok := strings.Cut(spec, "=")
		target = strings.TrimSpace(target)
		if !ok || name == "" || target == "" {
			return nil, usageError(fmt.Errorf("--mcp %q: use NAME=COMMAND or NAME=URL", spec))
		}
		cfg := mcp.Config{Name: name}
		if scheme, _, ok := strings.Cut(target, "://"); ok && !strings.ContainsAny(scheme, " /") {
			cfg.URL = target
		} else {
			argv := strings.Fields(target)
			cfg.Command, cfg.Args = argv[0], argv[1:]
		}
		c, err := mcp.New(cfg)
		if err != nil {
			return nil, usageError(fmt.Errorf("--mcp %q: %w", spec, err))
		}
		sets = append(sets, c)
	}
	return sets, nil
}

// commandHooks returns the hooks that --hook gives, in order.
func (f *agentFlags) commandHooks() ([]agent.Hook, error) {
	var hooks []agent.Hook
	names := map[string]int{}
	for _, spec := range f.hooks {
		on, command, ok := strings.Cut(spec, "=")
		argv := strings.Fields(command)
		if !ok || on == "" || len(argv) == 0 {
			return nil, usageError(fmt.Errorf("--hook %q: use EVENT[:MATCHER]=COMMAND", spec))
		}
		event, matcher, _ := strings.Cut(on, ":")
		name := filepath.Base(argv[0])
		if names[name]++; names[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, names[name])
		}
		h, err := commandhook.New(name, agent.HookEvent(event), matcher, argv, 0)
		if err != nil {
			return nil, usageError(fmt.Errorf("--hook %q: %w", spec, err))
		}
		hooks = append(hooks, h)
	}
	// The agent checks events and matchers: ask it now, for a clear error.
	if _, err := agent.New("check", remoteModel{}, &agent.Options{Hooks: hooks}); err != nil {
		return nil, usageError(fmt.Errorf("--hook: %w", err))
	}
	return hooks, nil
}

// check validates the flags that need no I/O.
func (f *agentFlags) check() error {
	if f.timeout <= 0 {
		return usageError(fmt.Errorf("--timeout must be positive, got %s", f.timeout))
	}
	if f.maxTurns <= 0 {
		return usageError(fmt.Errorf("--max-turns must be positive, got %d", f.maxTurns))
	}
	switch agent.PermissionMode(f.mode) {
	case "", agent.PermissionAsk, agent.PermissionAcceptReads, agent.PermissionAcceptEdits, agent.PermissionBypass:
	default:
		return usageError(fmt.Errorf("--mode %q: use ask, accept_reads, accept_edits or bypass", f.mode))
	}
	if f.agentsFile == "" && (f.root != "" || f.pick != "") {
		return usageError(errors.New("--root and --agent are for the agents of a prototypes file: give it with --agents FILE"))
	}
	return nil
}

// permissions returns the agent's permissions: --mode, or accept_edits
// when the agent has tools that act, or none.
func (f *agentFlags) permissions() *agent.Permissions {
	mode := agent.PermissionMode(f.mode)
	if mode == "" && (f.edit != "" || f.bash != "" || f.web || len(f.mcp) > 0) {
		mode = agent.PermissionAcceptEdits
	}
	if mode == "" {
		return nil
	}
	return &agent.Permissions{Mode: mode}
}

// newAssistant builds the assistant agent from f, or with --agents the
// agent of the prototype --agent names (else the file's first llm
// prototype). With serve false the
// agent is only used to start runs and follow their events, so it needs
// no model: the processes that serve it have their own.
func newAssistant(ctx context.Context, f *agentFlags, getenv func(string) string, serve bool) (*agent.Agent[string], error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.agentsFile != "" {
		ps, err := f.loadAgents()
		if err != nil {
			return nil, err
		}
		p, err := pickPrototype(ps, f.pick)
		if err != nil {
			return nil, err
		}
		return f.prototypeAgent(ctx, p, getenv, serve)
	}
	var m model.Model = remoteModel{}
	var tools []tool.Tool
	var toolsets []tool.Toolset
	hooks, err := f.commandHooks()
	if err != nil {
		return nil, err
	}
	servers, err := f.mcpServers()
	if err != nil {
		return nil, err
	}
	if serve {
		// Each tool works in the directory of the run's user when the
		// run has one (a run of calf serve with several users), else in
		// the directory the flag names.
		if f.read != "" {
			if tools, err = userTools(f.read, builtin.ReadOnly); err != nil {
				return nil, usageError(fmt.Errorf("--read: %w", err))
			}
		}
		if f.edit != "" {
			if f.read != f.edit {
				read, err := userTools(f.edit, builtin.ReadOnly)
				if err != nil {
					return nil, usageError(fmt.Errorf("--edit: %w", err))
				}
				if f.read != "" {
					return nil, usageError(errors.New("--read and --edit name different directories: give one, the directory the agent works in"))
				}
				tools = append(tools, read...)
			}
			edit, err := userTools(f.edit, builtin.Edit)
			if err != nil {
				return nil, usageError(fmt.Errorf("--edit: %w", err))
			}
			tools = append(tools, edit...)
		}
		if f.bash != "" {
			sh, err := bashTool(f.bash)
			if err != nil {
				return nil, usageError(fmt.Errorf("--bash: %w", err))
			}
			tools = append(tools, sh)
		}
		if f.web {
			fetch, err := builtin.WebFetch(nil)
			if err != nil {
				return nil, failure(err)
			}
			tools = append(tools, fetch)
		}
		toolsets = servers
		if f.replay != nil {
			m = f.replay
		} else {
			choice, err := selectModel(ctx, f.model, getenv, http.DefaultClient)
			if err != nil {
				return nil, failure(err)
			}
			if m, err = newModel(choice); err != nil {
				return nil, err
			}
		}
	}
	a, err := agent.New(agentName, m, &agent.Options{
		Instructions: f.system,
		Tools:        tools,
		Toolsets:     toolsets,
		MaxTurns:     f.maxTurns,
		Timeout:      f.timeout,
		Permissions:  f.permissions(),
		Hooks:        hooks,
	})
	if err != nil {
		return nil, failure(err)
	}
	return a, nil
}

// remoteModel stands for the model of an agent that other processes
// serve. It is never called: this process serves no handler.
type remoteModel struct{}

func (remoteModel) Name() string { return "remote" }

func (remoteModel) Generate(context.Context, *model.Request) (*model.Response, error) {
	return nil, errors.New("calf: this process does not serve the agent; calf worker processes do")
}
