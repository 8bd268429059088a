package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// defaultMaxHandoffs is the default of [HandoffOptions.MaxHandoffs].
const defaultMaxHandoffs = 10

// Target is what a handoff or a subagent tool needs of another agent: its
// name, which is all that is needed at run time (the agent may be served
// by any process on the broker), and a description for the model. Every
// [*Agent] is a Target; [Named] makes one from a name alone.
type Target interface {
	Name() string
	Description() string
}

// Named returns a [Target] for the agent called name, served elsewhere,
// described to the model by description.
func Named(name, description string) Target { return namedTarget{name, description} }

type namedTarget struct{ name, description string }

func (t namedTarget) Name() string        { return t.name }
func (t namedTarget) Description() string { return t.description }

// Hop is one run of a handoff chain.
type Hop struct {
	Agent string `json:"agent"`
	RunID string `json:"run_id"`
}

// HandoffRequest is a tool's request that its run hand the conversation
// to another agent. It travels in [ToolResultEvent.Handoff]; a tool in any
// language may set it.
type HandoffRequest struct {
	// Agent is the name of the agent that takes over.
	Agent string `json:"agent"`
	// Context, when not empty, reaches that agent as a user message after
	// the conversation.
	Context string `json:"context,omitempty"`
	// MaxHandoffs bounds the handoffs of the chain this one would extend.
	// Default: 10, as [HandoffOptions.MaxHandoffs].
	MaxHandoffs int `json:"max_handoffs,omitempty"`
}

// HandoffOptions configures a handoff tool made by [Handoff]. A nil
// *HandoffOptions means the defaults.
type HandoffOptions struct {
	// Name is the tool's name. Default: "transfer_to_" and the target's name.
	Name string
	// Description tells the model when to hand off. Default: built from
	// the target's description.
	Description string
	// InputFilter chooses what the target sees of the conversation. It
	// must be a pure function of its argument, which it may modify: a
	// redelivered handoff applies it again and must send the same
	// conversation. Default: all of it, including the handoff's own tool
	// call and result.
	InputFilter func([]model.Message) []model.Message
	// TextOnly gives the target only the conversation's user and
	// assistant text: tool results, the tool calls of assistant messages
	// and assistant messages left empty are dropped, so that the agent
	// that takes over does not see tools it does not have. It applies
	// before InputFilter.
	TextOnly bool
	// MaxHandoffs bounds the handoffs of one chain: a handoff that would
	// make more fails the run that asked for it, with an error naming the
	// chain. Default: 10.
	MaxHandoffs int
}

// Handoff returns a tool that hands the conversation to target. When the
// model calls it, the run ends, once every tool call of the step has its
// result, with an [OutputEvent] of status "handoff" naming the run that
// continues it; that run, of the target agent, starts from the
// conversation (through opts.InputFilter) plus the context the model gave
// in the tool's optional "context" argument. The caller of the first run
// gets the output of the last run of the chain, and the chain is recorded
// in each run's [RunInfo.Chain].
//
// The continuing run's id is derived from the first run's id:
// "{first}.handoff.{n}" for the n-th handoff of the chain. It shares the
// first run's correlation id, reply destination, parent, session,
// deadline and dependencies (as JSON, so the agents of a chain should
// read them through handles of one type, or the target use LocalDeps). The caller decodes the
// last run's output as the first agent's Out: the agents of a chain
// should share an Out type too.
//
// Use a handoff when another agent should take the conversation over and
// answer the user itself; use [AsTool] when an agent should delegate a
// task and carry on with the result.
func Handoff(target Target, opts *HandoffOptions) (tool.Tool, error) {
	var o HandoffOptions
	if opts != nil {
		o = *opts
	}
	if target == nil || !nameRE.MatchString(target.Name()) {
		return nil, fmt.Errorf("%w: handoff target must have a valid agent name", ErrInvalidAgent)
	}
	if o.Name == "" {
		o.Name = "transfer_to_" + target.Name()
	}
	if err := tool.CheckName(o.Name); err != nil {
		return nil, err
	}
	if o.Description == "" {
		o.Description = "Hand the conversation over to the agent " + target.Name() + "."
		if d := target.Description(); d != "" {
			o.Description += " " + d
		}
	}
	if o.MaxHandoffs <= 0 {
		o.MaxHandoffs = defaultMaxHandoffs
	}
	ht := &handoffTool{target: target, opts: o}
	ht.Tool = tool.NewRaw(model.ToolDefinition{
		Name:        o.Name,
		Description: o.Description,
		Parameters: json.RawMessage(`{"type":"object","properties":{"context":{"type":"string",` +
			`"description":"What the next agent needs to know that the conversation does not say (optional)."}},"additionalProperties":false}`),
	}, ht.call)
	return ht, nil
}

// handoffTool is the tool made by Handoff. The handlers look for it by
// name to apply its input filter.
type handoffTool struct {
	tool.Tool
	target Target
	opts   HandoffOptions
}

func (t *handoffTool) call(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
	var in struct {
		Context string `json:"context"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, &tool.ArgumentError{Tool: t.opts.Name, Err: err}
	}
	if err := HandoffTo(ctx, t.target.Name(), &HandoffRequest{Context: in.Context, MaxHandoffs: t.opts.MaxHandoffs}); err != nil {
		return nil, err
	}
	return tool.TextResult("Transferred to " + t.target.Name() + "."), nil
}

type handoffKey struct{}

// handoffSlot receives the handoff a tool asks for during its call.
type handoffSlot struct {
	mu  sync.Mutex
	req *HandoffRequest
}

func (s *handoffSlot) get() *HandoffRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req
}

// HandoffTo asks, from inside a tool call of an agent's run, that the run
// hand off to the agent named target once every tool call of the step has
// its result: a tool decides at run time where the conversation goes. req
// may be nil; its Agent field is set to target. The first handoff of a
// step wins. The tool's result must not be an error: a failed tool does
// not hand off. HandoffTo returns an error outside a tool call.
func HandoffTo(ctx context.Context, target string, req *HandoffRequest) error {
	s, ok := ctx.Value(handoffKey{}).(*handoffSlot)
	if !ok {
		return fmt.Errorf("agent: handoff to %s requested outside a tool call", target)
	}
	if !nameRE.MatchString(target) {
		return fmt.Errorf("agent: handoff to %q: not an agent name", target)
	}
	r := HandoffRequest{}
	if req != nil {
		r = *req
	}
	r.Agent = target
	s.mu.Lock()
	s.req = &r
	s.mu.Unlock()
	return nil
}

// correlationID is the correlation id of the run's events.
func (s *runState) correlationID() string { return s.CorrelationID(s.RunID) }

// metadata is the metadata of the run's events.
func (s *runState) metadata() calf.Metadata {
	return calf.Metadata{CorrelationID: s.correlationID(), RunID: s.RunID, SessionID: s.SessionID}
}

// hops returns a copy of a run's handoff chain as its user sees it, and
// engineHops one as a run's record holds it; both nil for an empty chain.
func hops(chain []engine.Hop) []Hop {
	if len(chain) == 0 {
		return nil
	}
	out := make([]Hop, len(chain))
	for i, h := range chain {
		out[i] = Hop(h)
	}
	return out
}

func engineHops(chain []Hop) []engine.Hop {
	if len(chain) == 0 {
		return nil
	}
	out := make([]engine.Hop, len(chain))
	for i, h := range chain {
		out[i] = engine.Hop(h)
	}
	return out
}

// chainString shows a chain of agents: "a → b → a".
func chainString(chain []engine.Hop, last string) string {
	names := make([]string, 0, len(chain)+1)
	for _, h := range chain {
		names = append(names, h.Agent)
	}
	return strings.Join(append(names, last), " → ")
}

// handOff ends a run whose step is answered and asks for a handoff: it
// records the tool results as advance does, and the handoff (or, over the
// chain's limit, the failure). It reports whether the step asked for one.
func (h *handlers) handOff(st *runState, by string) bool {
	i := slices.IndexFunc(st.Pending, func(p pendingCall) bool { return p.Handoff != nil && p.Status == StatusSuccess })
	if i < 0 {
		return false
	}
	req := st.Pending[i].Handoff
	for _, p := range st.Pending {
		st.Messages = append(st.Messages, engine.ToolMessage(p.ID, p.Name, p.Status == StatusError, p.Result))
		st.ToolCalls = append(st.ToolCalls, ToolCallRecord{Step: st.Step, ID: p.ID, Name: p.Name, Arguments: p.Arguments, Status: p.Status, Result: p.Result, Handoff: p.Handoff, Hooks: p.Hooks})
	}
	st.Pending = nil
	st.Phase = ""
	st.AdvancedBy = by
	st.EndedAt = h.rt.now()
	limit := req.MaxHandoffs
	if limit <= 0 {
		limit = defaultMaxHandoffs
	}
	if !nameRE.MatchString(req.Agent) {
		st.Status = RunFailed
		st.Error = fmt.Sprintf("handoff to %q refused: not an agent name", req.Agent)
		return true
	}
	if len(st.Chain) >= limit {
		st.Status = RunFailed
		st.Error = fmt.Sprintf("too many handoffs: the chain %s made %d handoffs, the limit, and the handoff to %s was refused",
			chainString(st.Chain, st.Agent), len(st.Chain), req.Agent)
		return true
	}
	st.Status = RunHandedOff
	st.HandedOffTo = &engine.Hop{Agent: req.Agent, RunID: st.HandoffRunID(st.RunID)}
	return true
}

// emitHandoff emits the input of the run that continues st, which handed
// off. It is derived from the recorded state alone, so a redelivery emits
// the same input with the same id.
func (h *handlers) emitHandoff(ctx context.Context, st *runState) error {
	to := st.HandedOffTo
	if to == nil {
		return calf.Permanent(fmt.Errorf("%w: run %s handed off to no run", ErrCorruptState, st.RunID))
	}
	var req *HandoffRequest
	var name string
	for _, c := range st.ToolCalls {
		if c.Step == st.Step && c.Handoff != nil && c.Status == StatusSuccess {
			req, name = c.Handoff, c.Name
			break
		}
	}
	if req == nil {
		return calf.Permanent(fmt.Errorf("%w: run %s handed off without a handoff request", ErrCorruptState, st.RunID))
	}
	if err := h.rt.readBack(ctx, st); err != nil {
		return err
	}
	msgs := slices.Clone(st.Messages)
	if t, ok := h.a.tool(name); ok {
		if ht, ok := t.(*handoffTool); ok {
			if ht.opts.TextOnly {
				msgs = engine.TextOnly(msgs)
			}
			if ht.opts.InputFilter != nil {
				msgs = ht.opts.InputFilter(msgs)
			}
		}
	}
	var reply *ReplyTo
	if st.ReplyTo != nil {
		r := ReplyTo(*st.ReplyTo)
		if r.CorrelationID == "" {
			r.CorrelationID = st.RunID // the caller waits for the first run's id
		}
		reply = &r
	}
	in := InputEvent{
		Content: req.Context, Messages: msgs, Deps: st.Deps, Stream: st.Stream,
		ReplyTo: reply, Parent: st.Parent,
		Chain:    append(hops(st.Chain), Hop{Agent: st.Agent, RunID: st.RunID}),
		Deadline: st.Deadline, MaxTurns: st.MaxTurns, Depth: st.Depth,
		Budget: st.Budget, Spent: new(st.spent()),
	}
	m, err := h.rt.client.NewMessage(ctx, InputChannel(to.Agent), in, calf.WithID(engine.InputID(to.RunID)), calf.WithKey(to.RunID),
		calf.WithMetadata(calf.Metadata{CorrelationID: st.correlationID(), RunID: to.RunID, SessionID: st.SessionID}))
	if err != nil {
		return err
	}
	if refused, err := h.rt.refuseUnserved(ctx, to.Agent, m, &in); err != nil || refused {
		return err
	}
	// The next run has an invoke_agent span of its own, in the trace of
	// the run that handed off: its start, as for a submitted run.
	_, span := h.rt.tel.Invoke(telemetry.StartedBy(ctx), to.Agent, m)
	err = h.rt.prepareInput(ctx, m.Channel)
	if err == nil {
		err = h.rt.client.Publish(ctx, m)
	}
	telemetry.EndInvoke(span, nil, err)
	return err
}

// handoffTargets lists the agents the agent's handoff tools lead to.
func (a *Agent[Out]) handoffTargets() []Target {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Target
	for _, name := range a.tools.Names() {
		if t, ok := a.tools.Get(name); ok {
			if ht, ok := t.(*handoffTool); ok {
				out = append(out, ht.target)
			}
		}
	}
	return out
}

// reachable returns the names of the agents a run of a may reach through
// handoff tools, a included, following the handoff tools of targets that
// are agents of this process.
func (a *Agent[Out]) reachable() []string {
	seen := map[string]bool{a.name: true}
	names := []string{a.name}
	queue := a.handoffTargets()
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if seen[t.Name()] {
			continue
		}
		seen[t.Name()] = true
		names = append(names, t.Name())
		if g, ok := t.(interface{ handoffTargets() []Target }); ok {
			queue = append(queue, g.handoffTargets()...)
		}
	}
	return names
}
