package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// Channels of subagent runs, besides the agent channels.
const (
	suffixSubagentSpawned   = "subagent_spawned"
	suffixSubagentCompleted = "subagent_completed"
)

// subagentSpawnedChannel returns the channel on which an agent announces
// the subagent runs its tool calls start. The events are informational.
func subagentSpawnedChannel(agent string) string {
	return channelPrefix + agent + "." + suffixSubagentSpawned
}

// subagentCompletedChannel returns the channel on which an agent receives
// the outputs of the subagent runs its tool calls started: the
// subagents' replies ([ReplyTo]).
func subagentCompletedChannel(agent string) string {
	return channelPrefix + agent + "." + suffixSubagentCompleted
}

// SubagentEvent is the payload of the subagent_spawned channel: a tool
// call of the run started the run RunID of the agent Agent.
type SubagentEvent struct {
	Step       int    `json:"step"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	Agent      string `json:"agent"`
	RunID      string `json:"run_id"`
}

// Defaults of [SubagentOptions].
const (
	defaultSubagentTimeout  = DefaultTimeout
	defaultMaxSubagentDepth = 5
)

// SubagentOptions configures a subagent tool made by [AsTool]. A nil
// *SubagentOptions means the defaults.
type SubagentOptions struct {
	// Name is the tool's name. Default: the subagent's name (for
	// [AsTask], "task").
	Name string
	// Description tells the model what the subagent does. Default: the
	// subagent's description.
	Description string
	// MaxTurns, when positive, bounds the model calls of each of the
	// subagent's runs, below the subagent's own maximum. The parent's
	// turns are not spent on the subagent's.
	MaxTurns int
	// Timeout bounds each of the subagent's runs: a run still going when
	// it passes ends with an error at its next step (its model and tool
	// calls are cut at the deadline), and the parent's model gets that
	// error as the tool's result. Default: [DefaultTimeout].
	Timeout time.Duration
	// MaxDepth bounds the nesting of subagent runs: a call from a run
	// that is already MaxDepth subagent calls deep gets an error result
	// instead of a run, so that agents that call each other (or
	// themselves) stop. Default: 5.
	MaxDepth int
}

// AsTool returns a tool that delegates a task to the agent sub: each call
// starts a run of sub, as its own run with its own budget, and the tool's
// result is that run's output (the text, or the JSON of a structured
// output), or an error result when the run fails or times out: the
// parent's model sees it and the parent's run goes on.
//
// No goroutine waits for the subagent: the tool call stays pending in the
// parent's state; the subagent's run (on any process that serves it, as
// only its name is needed) replies on the parent's subagent_completed
// channel, and that reply becomes the tool's result. The subagent's run
// id is derived from the parent's run id and the tool call id
// ("{parent}/{call}"), and its state records the parent ([RunInfo.Parent]).
// The parent's stream shows a subagent_spawned event when the run starts
// and a subagent_completed event when it ends.
//
// The model calls the tool with {"input": "..."}, the subagent's prompt.
// The subagent starts with no session and no dependencies from the
// parent: give it LocalDeps when it needs some.
func AsTool(sub Target, opts *SubagentOptions) (tool.Tool, error) {
	return asTool(sub, opts, false)
}

// defaultTaskToolName is the name of the tool [AsTask] makes unless
// [SubagentOptions.Name] gives another.
const defaultTaskToolName = "task"

// AsTask returns a tool, named "task" by default, with which the model
// hands an ad-hoc task to the general-purpose agent sub: the model
// describes the task in a few words and gives a prompt with everything the
// subagent needs, and sub, which knows nothing of the parent's
// conversation, carries it out with its own budget (its turns, and
// opts.MaxTurns and opts.Timeout) and returns its final answer as the
// tool's result. It is [AsTool] with those two arguments, whose
// description the subagent gets first in its prompt: sub is usually an
// agent with broad instructions ("You carry out one task for another
// agent, and answer with its result") and the tools the tasks need.
//
// The model calls the tool with {"description": "...", "prompt": "..."}.
func AsTask(sub Target, opts *SubagentOptions) (tool.Tool, error) {
	var o SubagentOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = defaultTaskToolName
	}
	if o.Description == "" {
		o.Description = "Hand a self-contained task to a subagent, which works on it with its own tools and budget " +
			"and answers with its result. It does not see this conversation: the prompt must say everything it " +
			"needs to know. Use it for work that needs many steps whose details this conversation does not need."
	}
	return asTool(sub, &o, true)
}

// AsTaskAmong returns a tool, named "task" by default, with which the
// model hands a task to the subagent of its choice among subs: as with
// [AsTask], it gives the task in a few words and a prompt with everything
// the subagent needs, and names the subagent in the argument "subagent",
// whose schema enumerates the names of subs. The tool's description lists
// each subagent with its description, which should say what it is for.
// The chosen subagent runs exactly as [AsTool]'s does, with opts for every
// one of them; a name that is not one of subs is an error result that
// lists the names, and no run starts.
//
// The model calls the tool with {"subagent": "...", "description": "...",
// "prompt": "..."}.
func AsTaskAmong(subs []Target, opts *SubagentOptions) (tool.Tool, error) {
	if len(subs) == 0 {
		return nil, fmt.Errorf("%w: a task tool needs at least one subagent", ErrInvalidAgent)
	}
	var o SubagentOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = defaultTaskToolName
	}
	names := make([]string, 0, len(subs))
	var b strings.Builder
	b.WriteString(cmp.Or(o.Description, "Hand a self-contained task to one of the subagents below, which works on it with its own tools "+
		"and budget and answers with its result. It does not see this conversation: the prompt must say everything it "+
		"needs to know."))
	b.WriteString("\n\nSubagents:")
	for _, sub := range subs {
		if sub == nil || !nameRE.MatchString(sub.Name()) {
			return nil, fmt.Errorf("%w: subagent must have a valid agent name", ErrInvalidAgent)
		}
		if slices.Contains(names, sub.Name()) {
			return nil, fmt.Errorf("%w: subagent %s given twice", ErrInvalidAgent, sub.Name())
		}
		names = append(names, sub.Name())
		b.WriteString("\n- " + sub.Name())
		if d := sub.Description(); d != "" {
			b.WriteString(": " + d)
		}
	}
	o.Description = b.String()
	enum, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	params := json.RawMessage(`{"type":"object","properties":{` +
		`"subagent":{"type":"string","enum":` + string(enum) + `,"description":"The name of the subagent to hand the task to."},` +
		`"description":{"type":"string","description":"The task in a few words."},` +
		`"prompt":{"type":"string","description":"The task for the subagent, with everything it needs to know: it does not see this conversation."}},` +
		`"required":["subagent","description","prompt"],"additionalProperties":false}`)
	st, err := newSubagentTool(subs[0].Name(), names, o, params, true)
	if err != nil {
		return nil, err
	}
	st.targets = slices.Clone(subs)
	return st, nil
}

func asTool(sub Target, opts *SubagentOptions, task bool) (tool.Tool, error) {
	var o SubagentOptions
	if opts != nil {
		o = *opts
	}
	if sub == nil || !nameRE.MatchString(sub.Name()) {
		return nil, fmt.Errorf("%w: subagent must have a valid agent name", ErrInvalidAgent)
	}
	if o.Name == "" {
		o.Name = sub.Name()
	}
	if o.Description == "" {
		o.Description = sub.Description()
	}
	if o.Description == "" {
		o.Description = "Ask the agent " + sub.Name() + " to carry out a task."
	}
	params := subagentParams
	if task {
		params = taskParams
	}
	st, err := newSubagentTool(sub.Name(), nil, o, params, task)
	if err != nil {
		return nil, err
	}
	st.targets = []Target{sub}
	return st, nil
}

// newSubagentTool makes the tool of the subagent agent, or of the one
// among choices that a call names when choices is not empty.
func newSubagentTool(agent string, choices []string, o SubagentOptions, params json.RawMessage, task bool) (*subagentTool, error) {
	if err := tool.CheckName(o.Name); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultSubagentTimeout
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = defaultMaxSubagentDepth
	}
	schema, err := tool.ParseSchema(params)
	if err != nil {
		return nil, err
	}
	st := &subagentTool{agent: agent, choices: choices, opts: o, schema: schema, task: task}
	st.Tool = tool.NewRaw(model.ToolDefinition{Name: o.Name, Description: o.Description, Parameters: params}, st.call)
	return st, nil
}

// AddSubagent gives sub to the agent as a tool; see [AsTool]. Like
// AddTool, it must be called before Serve: after, it refuses with an
// error matching [ErrAlreadyServed].
func (a *Agent[Out]) AddSubagent(sub Target, opts *SubagentOptions) error {
	t, err := AsTool(sub, opts)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	return a.AddTool(t)
}

// subagentTool is the tool made by AsTool. The tool-call handler starts
// the subagent's run instead of calling it.
type subagentTool struct {
	tool.Tool
	agent   string   // the subagent, or the first of choices
	choices []string // made by AsTaskAmong: the subagents a call chooses among
	opts    SubagentOptions
	schema  *tool.Schema
	task    bool // made by AsTask or AsTaskAmong: its arguments are a description and a prompt
	// targets are the subagents as given, which a runtime that serves on
	// demand serves with the agent (see serveDelegates).
	targets []Target
}

var taskParams = json.RawMessage(`{"type":"object","properties":{` +
	`"description":{"type":"string","description":"The task in a few words."},` +
	`"prompt":{"type":"string","description":"The task for the subagent, with everything it needs to know: it does not see this conversation."}},` +
	`"required":["description","prompt"],"additionalProperties":false}`)

var subagentParams = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string",` +
	`"description":"The task for the agent, with everything it needs to know."}},"required":["input"],"additionalProperties":false}`)

// input returns the subagent's prompt from the call's arguments.
func (t *subagentTool) input(args json.RawMessage) (string, error) {
	_, in, err := t.target(args)
	return in, err
}

// target returns the subagent a call runs and its prompt, from the call's
// arguments.
func (t *subagentTool) target(args json.RawMessage) (string, string, error) {
	var in struct {
		Input       string `json:"input"`
		Subagent    string `json:"subagent"`
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", "", &tool.ArgumentError{Tool: t.opts.Name, Err: err}
	}
	agent := t.agent
	if len(t.choices) > 0 {
		if !slices.Contains(t.choices, in.Subagent) {
			return "", "", &tool.ArgumentError{Tool: t.opts.Name, Err: fmt.Errorf("there is no subagent %q: choose one of %s", in.Subagent, strings.Join(t.choices, ", "))}
		}
		agent = in.Subagent
	}
	if err := t.schema.Validate(args); err != nil {
		return "", "", &tool.ArgumentError{Tool: t.opts.Name, Err: err}
	}
	if t.task {
		if strings.TrimSpace(in.Description) == "" || strings.TrimSpace(in.Prompt) == "" {
			return "", "", &tool.ArgumentError{Tool: t.opts.Name, Err: errors.New("description and prompt must not be empty")}
		}
		return agent, "Task: " + strings.TrimSpace(in.Description) + "\n\n" + in.Prompt, nil
	}
	if in.Input == "" {
		return "", "", &tool.ArgumentError{Tool: t.opts.Name, Err: errors.New("input is empty")}
	}
	return agent, in.Input, nil
}

// call reports bad arguments; valid calls never reach it, as the handlers
// start the subagent instead.
func (t *subagentTool) call(_ context.Context, args json.RawMessage) (*tool.Result, error) {
	if _, err := t.input(args); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("agent: the subagent tool %q runs only as a tool of an agent served on a runtime", t.opts.Name)
}

// hasSubagents reports whether the agent has a subagent tool.
func (a *Agent[Out]) hasSubagents() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, name := range a.tools.Names() {
		if t, ok := a.tools.Get(name); ok {
			if _, ok := t.(*subagentTool); ok {
				return true
			}
		}
	}
	return false
}

// subagentCall reports whether ev calls a subagent tool with valid
// arguments. Invalid ones take the ordinary path, which reports them to
// the model.
func (h *handlers) subagentCall(ev ToolCallEvent) (*subagentTool, string, bool) {
	t, ok := h.a.tool(ev.ToolName)
	if !ok {
		return nil, "", false
	}
	sub, ok := t.(*subagentTool)
	if !ok {
		return nil, "", false
	}
	name, input, err := sub.target(json.RawMessage(ev.Arguments))
	if err != nil {
		return nil, "", false
	}
	if name != sub.agent {
		chosen := *sub // the tool as it is for the subagent the call chose
		chosen.agent = name
		sub = &chosen
	}
	return sub, input, true
}

// startSubagent starts the subagent run of a tool call, and leaves the call
// pending: the run's reply completes it. A redelivered call submits the
// same run again, which starts nothing new (a run that has ended answers
// again).
func (h *handlers) startSubagent(ctx context.Context, msg *calf.Message, st *runState, ev ToolCallEvent, sub *subagentTool, input string) error {
	if st.Depth >= sub.opts.MaxDepth {
		p := pendingCall{ID: ev.ToolCallID, Name: ev.ToolName}
		res := errorResult(ev.Step, p, fmt.Errorf("the agent %s was not called: this run is %d subagent calls deep, the limit", sub.agent, st.Depth))
		return h.recordResult(ctx, st.RunID, res, calf.Metadata{})
	}
	if h.a.hasHooks(HookSubagentStart) {
		o := h.a.runHooks(ctx, HookSubagentStart, HookInput{
			Event: HookSubagentStart, Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: ev.Step,
			ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Subagent: sub.agent, Prompt: input,
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := h.emitHookDecisions(ctx, st.metadata(), HookDecisionEvent{Event: HookSubagentStart, Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Subagent: sub.agent, Decisions: o.records}); err != nil {
			return err
		}
		if o.denied != "" {
			res := errorResult(ev.Step, pendingCall{ID: ev.ToolCallID, Name: ev.ToolName}, errors.New(o.denied))
			res.Hooks = o.records
			return h.recordResult(ctx, st.RunID, res, calf.Metadata{})
		}
		input = o.prompt
	}
	child := engine.SubagentRunID(st.RunID, ev.ToolCallID)
	spawned := SubagentEvent{Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Agent: sub.agent, RunID: child}
	if _, err := h.rt.client.Emit(ctx, subagentSpawnedChannel(h.a.name), spawned, calf.WithID(child+".spawned"), calf.WithKey(st.RunID)); err != nil {
		return err
	}
	ref, err := json.Marshal(engine.SubagentRef{Run: st.RunID, Step: ev.Step, Tool: ev.ToolName, Call: ev.ToolCallID, Session: st.SessionID, Agent: sub.agent, Trace: msg.Metadata.Traceparent})
	if err != nil {
		return err
	}
	start := msg.Metadata.Time // the same deadline for every delivery
	if start.IsZero() {
		start = h.rt.now()
	}
	in := InputEvent{
		Content: input, Parent: st.RunID,
		ReplyTo:  &ReplyTo{Channel: subagentCompletedChannel(h.a.name), Key: st.RunID, CorrelationID: st.correlationID(), Ref: string(ref)},
		Deadline: start.Add(sub.opts.Timeout), MaxTurns: sub.opts.MaxTurns, Depth: st.Depth + 1, Root: st.root(h.a.name),
	}
	if b := st.Budget; b != nil {
		in.Budget = b.Remaining(st.spent()) // what the parent has left
	}
	m, err := h.rt.client.NewMessage(ctx, InputChannel(sub.agent), in, calf.WithID(engine.InputID(child)), calf.WithKey(child),
		calf.WithMetadata(calf.Metadata{CorrelationID: child, RunID: child}))
	if err != nil {
		return err
	}
	m.Metadata.SessionID = "" // the subagent does not continue the parent's conversation
	if refused, err := h.rt.refuseUnserved(ctx, sub.agent, m, &in); err != nil || refused {
		return err
	}
	// The subagent's run has an invoke_agent span of its own, under the
	// parent's: its start, as for a submitted run.
	_, span := h.rt.tel.Invoke(telemetry.StartedBy(ctx), sub.agent, m)
	err = h.rt.prepareInput(ctx, m.Channel)
	if err == nil {
		err = h.rt.client.Publish(ctx, m)
	}
	telemetry.EndInvoke(span, nil, err)
	if err != nil {
		return fmt.Errorf("agent %s: start subagent %s: %w", h.a.name, sub.agent, err)
	}
	return nil
}

// onSubagentCompleted turns a subagent run's output into the result of the
// tool call that started it: it records the result (so that a redelivered
// tool call emits it rather than starting the subagent again) and emits it
// on the tool-result channel with the id a tool's result would have.
func (h *handlers) onSubagentCompleted(ctx context.Context, msg *calf.Message) error {
	var out OutputEvent
	if err := msg.Decode(&out); err != nil {
		return calf.Permanent(err)
	}
	var ref engine.SubagentRef
	if err := json.Unmarshal([]byte(out.Ref), &ref); err != nil || ref.Run == "" || ref.Call == "" {
		return calf.Permanent(fmt.Errorf("agent %s: subagent reply %s has no valid ref %q", h.a.name, msg.ID, out.Ref))
	}
	if out.NotServed {
		// A deployment's fault, which the model cannot mend: the run
		// fails, naming the agent that no process serves.
		return h.failed(ctx, ref.Run, fmt.Sprintf("its subagent (tool %s) could not run: %s", ref.Tool, out.Error), true)
	}
	res := subagentResult(ref, &out)
	if h.a.hasHooks(HookSubagentStop) {
		var err error
		if res, err = h.subagentStopHooks(ctx, msg, ref, &out, res); err != nil {
			return err
		}
	}
	return h.recordResult(ctx, ref.Run, res, calf.Metadata{RunID: ref.Run, SessionID: ref.Session, Traceparent: ref.Trace})
}

// subagentStopHooks runs the subagent_stop hooks on the result res that a
// subagent's output out makes, publishes their decisions, and returns the
// result they leave.
func (h *handlers) subagentStopHooks(ctx context.Context, msg *calf.Message, ref engine.SubagentRef, out *OutputEvent, res ToolResultEvent) (ToolResultEvent, error) {
	name := cmp.Or(ref.Agent, out.Agent)
	if t, ok := h.a.tool(ref.Tool); ok && ref.Agent == "" { // a reply to an earlier version
		if sub, ok := t.(*subagentTool); ok {
			name = sub.agent // the agent called, though its run may have handed off
		}
	}
	status := RunFailed
	switch out.Status {
	case OutputComplete:
		status = RunComplete
	case OutputCancelled:
		status = RunCancelled
	}
	o := h.a.runHooks(ctx, HookSubagentStop, HookInput{
		Event: HookSubagentStop, Agent: h.a.name, RunID: ref.Run, SessionID: ref.Session, Step: ref.Step,
		ToolCallID: ref.Call, ToolName: ref.Tool, Subagent: name, SubagentRunID: engine.SubagentRunID(ref.Run, ref.Call),
		Status: status, Output: engine.OutputText(out.Content), Error: out.Error, Result: res.Result,
	})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	md := calf.Metadata{CorrelationID: cmp.Or(msg.Metadata.CorrelationID, ref.Run), RunID: ref.Run, SessionID: ref.Session}
	if err := h.emitHookDecisions(ctx, md, HookDecisionEvent{Event: HookSubagentStop, Step: ref.Step, ToolCallID: ref.Call, ToolName: ref.Tool, Subagent: name, Decisions: o.records}); err != nil {
		return res, err
	}
	switch {
	case o.denied != "":
		res = errorResult(ref.Step, pendingCall{ID: ref.Call, Name: ref.Tool}, errors.New(o.denied))
	case o.result != res.Result:
		res.Result, res.Status = o.result, StatusSuccess
		if o.result.IsError {
			res.Status = StatusError
		}
	}
	res.Hooks = o.records
	return res, nil
}

// recordResult records res as the result of its call in run, with a
// create-only write (a result recorded first by another delivery wins),
// and emits the recorded result on the tool-result channel, with md over
// the metadata of the message being handled.
func (h *handlers) recordResult(ctx context.Context, run string, res ToolResultEvent, md calf.Metadata) error {
	data, err := json.Marshal(res)
	if err != nil {
		return calf.Permanent(err)
	}
	// A subagent's result is a record of its own, on every run store.
	if res, err = h.rt.runs.RecordToolResult(ctx, run, res, data, nil); err != nil {
		return err
	}
	_, err = h.rt.client.Emit(ctx, toolResultChannel(h.a.name), res, calf.WithID(engine.ToolResultID(run, res.Step, res.ToolCallID)),
		calf.WithKey(run), calf.WithMetadata(md))
	return err
}

// subagentResult is the tool result a subagent's output makes.
func subagentResult(ref engine.SubagentRef, out *OutputEvent) ToolResultEvent {
	ev := ToolResultEvent{Step: ref.Step, ToolCallID: ref.Call, ToolName: ref.Tool, Status: StatusSuccess, Spent: &Spent{Usage: out.Usage, Cost: out.Cost}}
	if out.Status != OutputComplete {
		reason := out.Error
		if reason == "" {
			reason = "the run ended with status " + out.Status
		}
		ev.Status = StatusError
		ev.Result = tool.ErrorResult(fmt.Errorf("the agent %s did not finish the task (%s): %s", out.Agent, out.Status, reason))
		return ev
	}
	var s string
	if err := json.Unmarshal(out.Content, &s); err == nil {
		ev.Result = tool.TextResult(s)
		return ev
	}
	ev.Result = &tool.Result{Parts: []model.Part{model.TextPart(string(out.Content))}, Structured: out.Content}
	return ev
}

// within bounds a timeout by the run's deadline, if it has one.
func (h *handlers) within(st *runState, timeout time.Duration) time.Duration {
	if st.Deadline.IsZero() {
		return timeout
	}
	if left := st.Deadline.Sub(h.rt.now()); left < timeout {
		return max(left, time.Millisecond)
	}
	return timeout
}

// maxTurns is the run's bound on model calls.
func (h *handlers) maxTurns(st *runState) int {
	if st.MaxTurns > 0 && st.MaxTurns < h.a.opts.MaxTurns {
		return st.MaxTurns
	}
	return h.a.opts.MaxTurns
}

// cancelSubagents cancels the subagent runs (or the last runs of their
// handoff chains) that the cancelled run st was waiting for, and theirs in
// turn. It is best effort: a failure is logged, and a subagent run that
// ends anyway only answers a run that no longer listens.
func (rt *Runtime) cancelSubagents(ctx context.Context, st *runState, depth int) {
	if depth > maxChain {
		return
	}
	for _, p := range st.Pending {
		if p.Result != nil {
			continue
		}
		id := engine.SubagentRunID(st.RunID, p.ID)
		if _, err := rt.store.Get(ctx, store.KindRun, id); err != nil {
			continue // not a subagent call, or its run has not started
		}
		last, err := rt.lastOfChain(ctx, id)
		if err == nil {
			last, err = rt.cancelRun(ctx, last.RunID, last.Agent, "its parent run "+st.RunID+" was cancelled")
		}
		if err != nil {
			rt.log.Warn("agent: cancel subagent run", "run", id, "parent", st.RunID, "err", err)
			continue
		}
		if last.Status != RunCancelled {
			continue
		}
		if err := rt.emitOutput(ctx, last); err != nil {
			rt.log.Warn("agent: emit cancelled output", "agent", last.Agent, "run", last.RunID, "err", err)
		}
		rt.cancelSubagents(ctx, last, depth+1)
	}
}
