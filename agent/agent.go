package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// Defaults of [Options].
const (
	DefaultMaxTurns     = 20
	DefaultMaxRepairs   = 2
	DefaultTimeout      = 10 * time.Minute
	DefaultStartTimeout = 3 * time.Second
)

// Defaults of [Options] that no other package needs.
const (
	defaultModelTimeout = 2 * time.Minute
	defaultToolTimeout  = 2 * time.Minute
)

// Options configures an [Agent]. A nil *Options means the defaults.
type Options struct {
	// Description says what the agent does, for people and for other
	// agents that call it.
	Description string
	// Instructions is the system prompt.
	Instructions string
	// InstructionsFunc computes the system prompt for each model call; it
	// takes precedence over Instructions. It reads the run's dependencies
	// through their [Deps] handle. An error it returns fails the run, the
	// error's message in the run's error ("instructions: ..."), unless it
	// marks an outage ([calf.IsUnavailable]): the step is then retried as
	// for a store that cannot be reached.
	InstructionsFunc func(rc RunContext) (string, error)
	// Tools the agent may call. More can be added with [Agent.AddTool].
	Tools []tool.Tool
	// WakeUps, when set, gives the agent the built-in tool
	// schedule_wakeup, with which the model schedules a follow-up of its
	// own in the run's session ("check the build again in 20 minutes"):
	// a durable timer that, when due, starts the session's next turn with
	// the note the model left. See [WakeUps]. Default: none.
	WakeUps *WakeUps
	// Flow, when set, holds the agent's runs to limits per key across
	// every process that serves it: concurrency, rate, debounce and
	// priority ([FlowControl]). Default: none.
	Flow *FlowControl
	// Toolsets are groups of tools that may change while the agent is
	// served, such as MCP servers' (package mcp): their current tools are
	// offered to the model with Tools at each model call. A toolset's
	// tool whose name is taken by one of Tools is not offered.
	Toolsets []tool.Toolset
	// Temperature, when set, is passed to the model.
	Temperature *float64
	// MaxTokens, when positive, bounds each response.
	MaxTokens int
	// ToolChoice constrains tool calling. Default: auto.
	ToolChoice model.ToolChoice
	// SequentialTools asks the model for at most one tool call per response.
	// Default: the model may call several tools at once, and they run in
	// parallel.
	SequentialTools bool
	// MaxTurns bounds the model calls of one run. Default: DefaultMaxTurns.
	MaxTurns int
	// MaxRepairs bounds the extra model calls spent asking the model to
	// correct output that fails validation. Default: DefaultMaxRepairs;
	// negative means none.
	MaxRepairs int
	// Timeout bounds a whole run, as seen by Run and RunStream. Default:
	// DefaultTimeout.
	Timeout time.Duration
	// StartTimeout is how long Run and RunStream wait for a sign that a
	// process took the run (its state in the store, or its output) before
	// they ask the broker whether any process serves the agent: when none
	// does, they cancel the run and return an error matching
	// [ErrNotServed]. [RunOptions.WaitForWorkers] turns the check off.
	// Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// ModelTimeout bounds one model call. Default: 2 minutes.
	ModelTimeout time.Duration
	// Hooks run before and after the agent's tool calls, in order; see
	// [Hook].
	Hooks []Hook
	// Memory lists what the agent remembers: before each model call, each
	// may add messages after the instructions; see [Memory].
	Memory []Memory
	// Budget, when set, bounds what each run of the agent spends, unless
	// the run gives its own ([RunOptions.Budget]); see [Budget].
	Budget *Budget
	// Compaction, when set, keeps a run's context under a number of
	// tokens by compacting its older messages before a model call; see
	// [compaction.Config]. Each compaction is published as a
	// [ContextCompactedEvent]. Default: the model sees the whole
	// conversation.
	Compaction *compaction.Config
	// Permissions, when set, decide which tool calls run, which are
	// refused, and which wait for a person's approval; see [Permissions]
	// and [approval.Approval]. Default: every call runs.
	Permissions *Permissions
	// InputGuardrails check the user's input before the run's first model
	// call (or alongside it); OutputGuardrails check the final output
	// before the run completes. See [Guardrail].
	InputGuardrails, OutputGuardrails []Guardrail
	// ToolTimeout bounds one tool call. Default: 2 minutes. At
	// the timeout the model gets an error for the call and the run goes
	// on, even when the tool ignores its context; what such a tool returns
	// later is dropped and logged.
	ToolTimeout time.Duration
	// SessionAnswersOnly has a run in a session add to the session, when
	// it completes (or hands off), only the user's input and the agent's
	// answer (its last assistant message, when it makes no tool call):
	// the assistant's messages that made tool calls and the tool results
	// stay in the run's record ([RunInfo.Messages], [RunInfo.ToolCalls])
	// and out of what the session's next runs start from. Within a run
	// the model sees its tool calls and results either way. A run that
	// hands off adds its input only, and the run that answers adds the
	// answer; a compaction that covered the run's own messages is not
	// kept for the session. Default: false, the session gets every
	// message of the run.
	SessionAnswersOnly bool
}

// Agent is an agent's configuration: its model, instructions, tools and
// output type. Out is the type of its output: string for free text
// ([New]), or any type with a JSON Schema for structured output
// ([NewTyped]), which is validated and repaired. The dependencies its
// tools receive are not part of its type: they travel with each run and
// are read through a [Deps] handle.
//
// An Agent does nothing by itself: [Agent.Serve] turns it into handlers on
// a [Runtime], and [Agent.Run] starts a run that those handlers carry out,
// in this process or on any worker that serves the agent.
type Agent[Out any] struct {
	spec
}

// spec is an agent apart from the type of its output, which the handlers
// need only to check that an answer decodes into it: the handlers serve a
// spec, and an [Agent] is a spec with its output type.
type spec struct {
	name   string
	model  model.Model
	opts   Options
	output *tool.Schema // nil for string output
	// decodes reports whether JSON decodes into the output type.
	decodes func(json.RawMessage) error

	mu    sync.RWMutex
	tools *tool.Set
	// serving is set by the first [Agent.Serve]: the agent's tools are
	// fixed from then on.
	serving bool
	// served records the runtimes the agent is served on (see onDemand).
	served runlife.Served[*Runtime]
	// step is a custom agent's step ([NewCustom]), called in place of
	// the model.
	step func(call *stepCall) (*stepReply, error)
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ErrInvalidAgent is returned for an agent that cannot be built.
var ErrInvalidAgent = errors.New("agent: invalid agent")

// ErrAlreadyServed is returned by [Agent.AddTool] and
// [Agent.AddSubagent] once the agent is served: its tools are fixed when
// it is served.
var ErrAlreadyServed = errors.New("agent: the agent is served already: add its tools before Serve or Run")

// New returns an agent named name that uses m and answers in text. The
// name becomes part of the agent's channels, so it may hold only letters,
// digits, '_' and '-'.
func New(name string, m model.Model, opts *Options) (*Agent[string], error) {
	return NewTyped[string](name, m, opts)
}

// NewTyped is like [New] for an agent whose output has type Out: the
// model is asked for JSON following Out's schema, and [Agent.Run] returns
// an Out. NewTyped[string] is New.
func NewTyped[Out any](name string, m model.Model, opts *Options) (*Agent[Out], error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: name %q must match %s", ErrInvalidAgent, name, nameRE)
	}
	a := &Agent[Out]{spec{name: name, model: m, tools: &tool.Set{}, decodes: decodeInto[Out]}}
	if opts != nil {
		a.opts = *opts
	}
	o := &a.opts
	for i, m := range o.Memory {
		if m == nil {
			return nil, fmt.Errorf("%w: Memory %d is nil", ErrInvalidAgent, i)
		}
	}
	o.Memory = slices.Clone(o.Memory)
	if b := o.Budget; b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("%w: Budget: %v", ErrInvalidAgent, err)
		}
	}
	if c := o.Compaction; c != nil {
		if c.Threshold <= 0 || c.KeepRecent < 0 {
			return nil, fmt.Errorf("%w: Compaction.Threshold must be positive and KeepRecent not negative, got %d and %d", ErrInvalidAgent, c.Threshold, c.KeepRecent)
		}
		cc := *c
		o.Compaction = &cc
	}
	if err := checkHooks(o.Hooks); err != nil {
		return nil, err
	}
	o.Hooks = slices.Clone(o.Hooks)
	if o.Permissions != nil {
		if err := o.Permissions.validate(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidAgent, err)
		}
		p := *o.Permissions
		p.Allowed, p.Disallowed = slices.Clone(p.Allowed), slices.Clone(p.Disallowed)
		o.Permissions = &p
	}
	if err := checkGuardrails(o.InputGuardrails, GuardrailOnInput); err != nil {
		return nil, err
	}
	if err := checkGuardrails(o.OutputGuardrails, GuardrailOnOutput); err != nil {
		return nil, err
	}
	o.InputGuardrails, o.OutputGuardrails = slices.Clone(o.InputGuardrails), slices.Clone(o.OutputGuardrails)
	if o.MaxTurns <= 0 {
		o.MaxTurns = DefaultMaxTurns
	}
	if o.MaxRepairs == 0 {
		o.MaxRepairs = DefaultMaxRepairs
	} else if o.MaxRepairs < 0 {
		o.MaxRepairs = 0
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.ModelTimeout <= 0 {
		o.ModelTimeout = defaultModelTimeout
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = defaultToolTimeout
	}
	if reflect.TypeFor[Out]().Kind() != reflect.String {
		s, err := tool.SchemaFor[Out]()
		if err != nil {
			return nil, fmt.Errorf("%w: output type: %w", ErrInvalidAgent, err)
		}
		a.output = s
		if sc, ok := m.(model.SchemaChecker); ok {
			if err := sc.CheckSchema(s.JSON()); err != nil {
				return nil, fmt.Errorf("%w: agent %s: model %s cannot take the output type's schema: %w", ErrInvalidAgent, name, m.Name(), err)
			}
		}
	}
	if err := o.Flow.Check(); err != nil {
		return nil, fmt.Errorf("%w: agent %s: %w", ErrInvalidAgent, name, err)
	}
	if o.WakeUps != nil {
		o.Tools = append(slices.Clone(o.Tools), wakeUpTool(name, *o.WakeUps))
	}
	for _, t := range o.Tools {
		if err := a.AddTool(t); err != nil {
			return nil, err
		}
	}
	o.Tools = nil
	seen := map[string]bool{}
	for i, ts := range o.Toolsets {
		if ts == nil {
			return nil, fmt.Errorf("%w: Toolsets %d is nil", ErrInvalidAgent, i)
		}
		name := ts.Name()
		if err := tool.CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: toolset: %v", ErrInvalidAgent, err)
		}
		if _, clash := a.tool(name); clash || seen[name] {
			return nil, fmt.Errorf("%w: toolset name %q is taken by a tool or another toolset", ErrInvalidAgent, name)
		}
		seen[name] = true
	}
	o.Toolsets = slices.Clone(o.Toolsets)
	return a, nil
}

// Must returns v, or panics with err when it is not nil: wrap a
// constructor of this package with it ([New], [NewTyped], [NewText],
// [NewCustom]) for agents defined at package level.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// decodeInto reports whether v decodes into an Out.
func decodeInto[Out any](v json.RawMessage) error {
	var out Out
	return json.Unmarshal(v, &out)
}

// outputType returns Out, for the check of handoff tools.
func (a *Agent[Out]) outputType() reflect.Type { return reflect.TypeFor[Out]() }

// Name returns the agent's name.
func (a *Agent[Out]) Name() string { return a.name }

// Description returns the agent's description.
func (a *Agent[Out]) Description() string { return a.opts.Description }

// Model returns the agent's model.
func (a *Agent[Out]) Model() model.Model { return a.model }

// AddTool adds a tool. It must be called before the agent is served
// ([Agent.Serve], or the first Run, RunStream or Submit on the default
// runtime): once served, it refuses with an error matching
// [ErrAlreadyServed], and the agent's tools stay those it was served with.
// Every worker that serves an agent must offer the same tools and handle
// their calls, and a tool added to one process's agent after Serve would
// be offered by that process only, with its calls subscribed nowhere.
// Tools that change while the agent runs come from a toolset
// ([Options.Toolsets]), whose calls travel on the toolset's channel.
//
// A handoff tool ([Handoff]) to an agent of another output type is
// refused with an error matching [ErrInvalidAgent]: the caller of a run
// decodes the output of the chain's last agent as the first agent's Out.
func (a *Agent[Out]) AddTool(t tool.Tool) error {
	if ht, ok := t.(*handoffTool); ok {
		if typed, ok := ht.target.(interface{ outputType() reflect.Type }); ok && typed.outputType() != reflect.TypeFor[Out]() {
			return fmt.Errorf("%w: agent %s: handoff tool %s: agent %s answers with %s, and %s's callers decode the output of a handoff chain as %s: the agents of a chain must share an output type",
				ErrInvalidAgent, a.name, ht.opts.Name, ht.target.Name(), typed.outputType(), a.name, reflect.TypeFor[Out]())
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.serving {
		return fmt.Errorf("agent %s: add tool %s: %w", a.name, t.Definition().Name, ErrAlreadyServed)
	}
	if sc, ok := a.model.(model.SchemaChecker); ok {
		def := t.Definition()
		if err := sc.CheckSchema(def.Parameters); err != nil {
			return fmt.Errorf("%w: agent %s: tool %s: model %s cannot take its parameters' schema: %w", ErrInvalidAgent, a.name, def.Name, a.model.Name(), err)
		}
	}
	if err := a.tools.Add(t); err != nil {
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	return nil
}

// Tools returns the definitions of the agent's own tools.
func (a *Agent[Out]) Tools() []model.ToolDefinition { return a.definitions() }

// definitions returns the definitions of the agent's own tools.
func (a *spec) definitions() []model.ToolDefinition {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.tools.Definitions()
}

func (a *spec) tool(name string) (tool.Tool, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.tools.Get(name)
}

// lookup finds the tool the model called name among the agent's tools and
// then its toolsets', and returns it with the last token of the channel
// its calls travel on: its name, or its toolset's.
func (a *spec) lookup(ctx context.Context, name string) (t tool.Tool, channel string, ok bool) {
	if t, ok := a.tool(name); ok {
		return t, name, true
	}
	for _, ts := range a.opts.Toolsets {
		tools, _ := ts.Tools(ctx)
		for _, t := range tools {
			if t.Definition().Name == name {
				return t, ts.Name(), true
			}
		}
	}
	return nil, "", false
}

// toolDefinitions returns the definitions of the agent's tools, then of
// its toolsets' current tools, those that perms (when not nil) refuse
// left out: the model is not offered a tool whose every call would be
// refused. A toolset's error is logged; its tools that it did return are
// offered.
func (a *spec) toolDefinitions(ctx context.Context, log *slog.Logger, perms *Permissions) []model.ToolDefinition {
	refused := func(t tool.Tool) bool {
		if perms == nil {
			return false
		}
		d, _ := perms.decide(t.Definition().Name, tool.KindOf(t))
		return d == decideDeny
	}
	defs := a.definitions()
	var taken map[string]bool
	if len(a.opts.Toolsets) > 0 {
		// A toolset's tool named as one of the agent's is not offered,
		// refused or not.
		taken = make(map[string]bool, len(defs))
		for _, d := range defs {
			taken[d.Name] = true
		}
	}
	if perms != nil {
		defs = slices.DeleteFunc(defs, func(d model.ToolDefinition) bool {
			t, ok := a.tool(d.Name)
			return ok && refused(t)
		})
	}
	for _, ts := range a.opts.Toolsets {
		tools, err := ts.Tools(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("agent: toolset", "agent", a.name, "toolset", ts.Name(), "err", err)
		}
		for _, t := range tools {
			d := t.Definition()
			if taken[d.Name] || tool.CheckName(d.Name) != nil {
				continue
			}
			taken[d.Name] = true
			if !refused(t) {
				defs = append(defs, d)
			}
		}
	}
	return defs
}

// validate turns the final response text into the output's JSON.
func (a *spec) validate(text string) (json.RawMessage, error) {
	if a.output == nil {
		return json.Marshal(text)
	}
	raw := json.RawMessage(extractJSON(text))
	if !json.Valid(raw) {
		return nil, errors.New("the response is not valid JSON")
	}
	if err := a.output.Validate(raw); err != nil {
		return nil, err
	}
	v := raw
	if a.output.Wrapped() {
		var err error
		if v, err = a.output.Unwrap(raw); err != nil {
			return nil, err
		}
	}
	if err := a.decodes(v); err != nil {
		return nil, fmt.Errorf("the response does not decode: %v", err)
	}
	return v, nil
}

// extractJSON strips white space and a Markdown code fence around JSON.
func extractJSON(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[i+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	return s
}

// unknownTool is the error the model gets for a call of a tool the agent
// does not have.
func (a *spec) unknownTool(name string) error {
	a.mu.RLock()
	names := a.tools.Names()
	a.mu.RUnlock()
	if len(names) == 0 {
		return fmt.Errorf("%w %q; this agent has no tools", tool.ErrUnknownTool, name)
	}
	return fmt.Errorf("%w %q; the tools are: %s", tool.ErrUnknownTool, name, strings.Join(names, ", "))
}
