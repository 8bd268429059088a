package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf/agent"
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
}

// agentFlagNames are the flags that configure the agent itself (not the
// caller's wait), which only a process that serves the agent uses.
var agentFlagNames = []string{"model", "system", "max-turns", "read"}

func (f *agentFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.model, "model", "", "the model: openai:NAME, a bare NAME, or the base URL of an OpenAI-compatible server "+
		"with an optional #NAME (default $"+envModel+", else "+defaultModel+")")
	fl.StringVar(&f.system, "system", defaultInstructions, "the agent's instructions (system prompt)")
	fl.DurationVar(&f.timeout, "timeout", agent.DefaultTimeout, "bound on the whole run")
	fl.IntVar(&f.maxTurns, "max-turns", agent.DefaultMaxTurns, "bound on the model calls of the run")
	fl.StringVar(&f.read, "read", "", "give the agent read-only file tools (read_file, list_dir, glob, grep) confined to `DIR`")
}

// check validates the flags that need no I/O.
func (f *agentFlags) check() error {
	if f.timeout <= 0 {
		return usageError(fmt.Errorf("--timeout must be positive, got %s", f.timeout))
	}
	if f.maxTurns <= 0 {
		return usageError(fmt.Errorf("--max-turns must be positive, got %d", f.maxTurns))
	}
	return nil
}

// newAssistant builds the assistant agent from f. With serve false the
// agent is only used to start runs and follow their events, so it needs
// no model: the processes that serve it have their own.
func newAssistant(ctx context.Context, f *agentFlags, getenv func(string) string, serve bool) (*agent.Agent[agent.NoDeps, string], error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var m model.Model = remoteModel{}
	var tools []tool.Tool
	if serve {
		var err error
		if f.read != "" {
			if tools, err = builtin.ReadOnly(f.read); err != nil {
				return nil, usageError(fmt.Errorf("--read: %w", err))
			}
		}
		choice, err := selectModel(ctx, f.model, getenv, http.DefaultClient)
		if err != nil {
			return nil, failure(err)
		}
		if m, err = newModel(choice); err != nil {
			return nil, err
		}
	}
	a, err := agent.New[agent.NoDeps, string](agentName, m, &agent.Options[agent.NoDeps]{
		Instructions: f.system,
		Tools:        tools,
		MaxTurns:     f.maxTurns,
		Timeout:      f.timeout,
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
