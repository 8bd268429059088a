package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// AgentOptions configure [NewAgent]. Nil means the defaults.
type AgentOptions struct {
	// Name names the agent. Default: the prototype's name.
	Name string
	// Model opens the prototype's model by its Model field (empty when the
	// prototype names none). Required: this package links no model
	// provider; package model/models opens them all by name:
	//
	//	Model: func(name string) (model.Model, error) { return models.Open(name, nil) }
	Model func(name string) (model.Model, error)
	// Tools makes the built-in tool of that name. Default: web_fetch; the
	// file tools and bash only when Root is set, confined to it;
	// web_search never (it needs a provider).
	Tools func(name string) (tool.Tool, error)
	// Root is the directory the default file tools and bash work in.
	Root string
	// MCP makes the toolset of one of the prototype's MCP servers.
	// Default: none, and a prototype that lists MCP servers is refused.
	MCP func(s conversation.MCPServer) (tool.Toolset, error)
	// ExtraTools are given to the agent besides the prototype's, and
	// allowed by its permissions whatever their mode (the host gives the
	// start_conversation and send tools this way).
	ExtraTools []tool.Tool
	// Instructions follow the prototype's system prompt, after a blank
	// line (the host lists the prototype's subagents this way).
	Instructions string
	// Agent holds the agent's other options (MaxTurns, Timeout, Hooks,
	// ToolTimeout, more Toolsets...). Its Description, Instructions,
	// Tools and Permissions are replaced by the prototype's, its Toolsets
	// extended with the MCP servers'.
	Agent *agent.Options
}

// NewAgent makes the agent an LLM prototype describes: the model its Model
// field names, its system prompt as the instructions, its role as the
// description, its built-in tools, its MCP servers (with AgentOptions.MCP)
// and its permissions. The agent is not served: serve it on a runtime
// ([agent.Agent.Serve]) to run it. The [Host] serves the agents of
// conversations this way, with the start_conversation and send tools
// added for a prototype with subagents; an agent made here without them
// runs alone, outside any conversation.
func NewAgent(p conversation.Prototype, opts *AgentOptions) (*agent.Agent[string], error) {
	var o AgentOptions
	if opts != nil {
		o = *opts
	}
	if k := kindOf(&p); k != conversation.KindLLM {
		return nil, fmt.Errorf("conversation: prototype %s is of kind %s, not %s: no agent is made of it", p.Name, k, conversation.KindLLM)
	}
	if o.Name == "" {
		o.Name = p.Name
	}
	if o.Model == nil {
		return nil, fmt.Errorf("conversation: prototype %s: no model opener (AgentOptions.Model)", p.Name)
	}
	if o.Tools == nil {
		root := o.Root
		o.Tools = func(name string) (tool.Tool, error) { return builtinTool(name, root) }
	}
	var ao agent.Options
	if o.Agent != nil {
		ao = *o.Agent
	}
	ao.Toolsets = slices.Clone(ao.Toolsets)
	for _, s := range p.MCPServers {
		if o.MCP == nil {
			return nil, errors.New("MCP servers are not connected here")
		}
		ts, err := o.MCP(s)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", s.Name, err)
		}
		ao.Toolsets = append(ao.Toolsets, ts)
	}
	m, err := o.Model(p.Model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", p.Model, err)
	}
	var tools []tool.Tool
	for _, name := range p.Tools {
		t, err := o.Tools(name)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	tools = append(tools, o.ExtraTools...)
	instructions := p.SystemPrompt
	if o.Instructions != "" {
		if instructions != "" {
			instructions += "\n\n"
		}
		instructions += o.Instructions
	}
	var perms *agent.Permissions
	if p.Permissions != nil {
		perms = &agent.Permissions{Mode: agent.PermissionMode(p.Permissions.Mode), Allowed: slices.Clone(p.Permissions.Allowed), Disallowed: p.Permissions.Disallowed}
		for _, t := range o.ExtraTools {
			perms.Allowed = append(perms.Allowed, t.Definition().Name)
		}
	}
	ao.Description, ao.Instructions, ao.Tools, ao.Permissions = p.Role, instructions, tools, perms
	if p.Flow != nil {
		fc, err := FlowControl(p.Flow)
		if err != nil {
			return nil, fmt.Errorf("prototype %s: flow: %w", p.Name, err)
		}
		ao.Flow = fc
	}
	return agent.New(o.Name, m, &ao)
}

// FlowControl returns the agent's flow control that f describes.
func FlowControl(f *conversation.PrototypeFlow) (*agent.FlowControl, error) {
	fc := &agent.FlowControl{Concurrency: f.Concurrency, Burst: f.Burst, MaxRunning: f.MaxRunning}
	switch f.Key {
	case "":
	case "session":
		fc.Key = func(in agent.FlowInput) string { return in.SessionID }
	case "first_word":
		fc.Key = func(in agent.FlowInput) string {
			w, _, _ := strings.Cut(strings.TrimSpace(in.Prompt), " ")
			w, _, _ = strings.Cut(w, ":")
			return w
		}
	default:
		return nil, fmt.Errorf("key %q: session, first_word, or none", f.Key)
	}
	if f.Rate != "" {
		n, per, err := conversation.ParseRate(f.Rate)
		if err != nil {
			return nil, err
		}
		fc.Rate, fc.Per = n, per
	}
	if f.Debounce != "" {
		d, err := time.ParseDuration(f.Debounce)
		if err != nil {
			return nil, fmt.Errorf("debounce %q: %w", f.Debounce, err)
		}
		fc.Debounce = d
	}
	return fc, fc.Check()
}
