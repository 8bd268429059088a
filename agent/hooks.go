package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/tool"
)

// HookEvent names a point of a run at which hooks run.
type HookEvent string

// The hook events.
const (
	// HookPreToolUse runs before a tool call is executed: a hook may let
	// it run, deny it (the model gets the reason as the call's error
	// result), or change its arguments.
	HookPreToolUse HookEvent = "pre_tool_use"
	// HookPostToolUse runs after a tool call returned, before its result
	// is recorded: a hook may let the result through, withhold it (the
	// model gets the reason as the call's error result), or change it.
	HookPostToolUse HookEvent = "post_tool_use"
	// HookUserPromptSubmit runs when a run starts on a prompt (a caller's,
	// or a parent's for a subagent), before the run's state is created: a
	// hook may let the prompt through, refuse it (the run ends failed,
	// with the reason, before any model call), or change it. The Matcher
	// selects agents by name.
	HookUserPromptSubmit HookEvent = "user_prompt_submit"
	// HookSubagentStart runs before a tool call of the run starts a
	// subagent's run (see [AsTool]): a hook may let it start, deny it (the
	// model gets the reason as the call's error result), or change its
	// prompt. The Matcher selects subagents by name.
	HookSubagentStart HookEvent = "subagent_start"
	// HookStop runs when a run ends, however it ended, before its output
	// is published; it is told, and cannot change the outcome: its
	// decision is ignored, and its error logged. The Matcher selects agents
	// by name. It runs at least once per run (again if the end is handled
	// again after a crash).
	HookStop HookEvent = "stop"
	// HookSubagentStop runs in the parent when a subagent's run (see
	// [AsTool]) has ended, before its output becomes the result of the
	// tool call that started it: a hook may let the result through,
	// withhold it (the model gets the reason as the call's error result),
	// or change it. The Matcher selects subagents by name. It sees the
	// subagent run's status, output and error, and the result the model
	// would get.
	HookSubagentStop HookEvent = "subagent_stop"
	// HookSessionStart runs when a run starts on a prompt in a session
	// ([RunOptions.SessionID]), after the user_prompt_submit hooks and
	// before the run's state is created: Source is "startup" when the
	// session has no stored conversation yet, "resume" when the run
	// continues one. A hook may let the run start, refuse it (the run ends
	// failed, with the reason, before any model call), or change its
	// prompt. The Matcher selects agents by name. A run reached by a
	// handoff continues a run already started and does not start the
	// session again.
	HookSessionStart HookEvent = "session_start"
	// HookSessionEnd runs when a run in a session has ended and, if it
	// completed, its messages were added to the session, before its output
	// is published: the session is idle until its next run. Like stop, it
	// is told (Status, Output, Error), and cannot change the outcome. The
	// Matcher selects agents by name. A run that handed off does not end
	// the session: the run that continues it does.
	HookSessionEnd HookEvent = "session_end"
	// HookPreCompact runs before a run's context is compacted (see
	// [Options.Compaction]), with the context's estimated size (Tokens): a hook may
	// let the compaction go ahead, or deny it, and the model call is then
	// made with the whole context. The Matcher selects agents by name.
	HookPreCompact HookEvent = "pre_compact"
)

// hookEvents lists the hook events, in the order of a run.
var hookEvents = []HookEvent{HookUserPromptSubmit, HookSessionStart, HookPreCompact, HookPreToolUse, HookPostToolUse,
	HookSubagentStart, HookSubagentStop, HookStop, HookSessionEnd}

// toldOnly reports whether the hooks of event are told of an outcome
// they cannot change.
func toldOnly(event HookEvent) bool { return event == HookStop || event == HookSessionEnd }

// HookAction is what a hook decides.
type HookAction string

// The hook actions.
const (
	// HookAllow lets the call (or its result) through; the next hooks run.
	HookAllow HookAction = "allow"
	// HookDeny stops the call (pre_tool_use) or withholds its result
	// (post_tool_use); no later hook runs.
	HookDeny HookAction = "deny"
	// HookTransform replaces the call's arguments (pre_tool_use) or its
	// result (post_tool_use); the next hooks see the new ones.
	HookTransform HookAction = "transform"
	// HookSkip lets the call (or its result) through as it is now, and no
	// later hook runs.
	HookSkip HookAction = "skip"
	// HookAsk, at pre_tool_use only, sends the call to a person's approval
	// (see [approval.Approval]), as a call that the agent's [Permissions] ask about,
	// even when they would let it run, and even when the agent has none:
	// the reason is the request's. The next hooks run: a later denial
	// still refuses the call, and a later transform changes the arguments
	// the approver is shown. Disallowed tools stay refused, and a tool
	// allowed for the session ([approval.Answer.ForSession]) still asks.
	HookAsk HookAction = "ask"
)

// HookInput is what a hook is called with.
type HookInput struct {
	Event      HookEvent `json:"event"`
	Agent      string    `json:"agent"`
	RunID      string    `json:"run_id"`
	SessionID  string    `json:"session_id,omitempty"`
	Step       int       `json:"step"`
	ToolCallID string    `json:"tool_call_id"`
	ToolName   string    `json:"tool_name"`
	ToolKind   tool.Kind `json:"tool_kind"`
	// Arguments are the call's arguments, as earlier hooks left them; for
	// post_tool_use, those the tool ran with.
	Arguments json.RawMessage `json:"arguments"`
	// Result is the tool's result, for post_tool_use; an error of the tool
	// is an error result.
	Result *tool.Result `json:"result,omitempty"`
	// Prompt is the run's prompt, for user_prompt_submit, or the
	// subagent's, for subagent_start, as earlier hooks left it.
	Prompt string `json:"prompt,omitempty"`
	// Subagent is the agent a subagent_start hook's call starts, or whose
	// run a subagent_stop hook's call started; SubagentRunID is that run,
	// for subagent_stop.
	Subagent      string `json:"subagent,omitempty"`
	SubagentRunID string `json:"subagent_run_id,omitempty"`
	// Source is "startup" or "resume", for session_start.
	Source string `json:"source,omitempty"`
	// Tokens is the estimated size of the run's context, for pre_compact.
	Tokens int `json:"tokens,omitempty"`
	// Status is how the run ended, for stop and session_end, or the
	// subagent's run, for subagent_stop; Output its output (the text, or
	// the JSON of a structured output) and Error why it failed.
	Status RunStatus `json:"status,omitempty"`
	Output string    `json:"output,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// HookDecision is a hook's answer. The zero value allows.
type HookDecision struct {
	Action HookAction `json:"action"`
	// Reason says why: for a denial, it is what the model is told.
	Reason string `json:"reason,omitempty"`
	// Arguments, for a transform at pre_tool_use, are the new arguments
	// (a JSON object).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result, for a transform at post_tool_use or subagent_stop, is the new
	// result.
	Result *tool.Result `json:"result,omitempty"`
	// Prompt, for a transform at user_prompt_submit, session_start or
	// subagent_start, is the new prompt.
	Prompt string `json:"prompt,omitempty"`
}

// defaultHookTimeout is the default of [Hook.Timeout].
const defaultHookTimeout = 30 * time.Second

// Hook is a function that runs at Event for the tool calls whose tool's
// name Matcher matches (for the events that are not about a tool call, the
// agents or subagents whose name it matches). The hooks of an event run in
// the order of [Options.Hooks], each seeing what the earlier ones left:
// see [HookAction]. A hook that returns an error, panics, returns an
// unknown action or a transform without its arguments, result or prompt,
// or outlasts its timeout, denies, and the model (or, for a prompt, the
// run's error) is told which hook failed and why.
//
// Hooks run in the process that handles the event, again if the event is
// delivered again before what it caused is recorded, so they should decide
// the same way for the same input. What the hooks of an event decided is
// published as a [HookDecisionEvent] on the agent's hook channel
// (calf.agent.{name}.hook), before the decision takes effect, so
// RunStream yields it (a hook event); the decisions about a tool call are also recorded
// with its result ([ToolResultEvent.Hooks], [ToolCallRecord.Hooks]).
type Hook struct {
	// Name identifies the hook in records and in what the model is told.
	Name string
	// Event is when the hook runs.
	Event HookEvent
	// Matcher selects the tools by name: "" or "*" for every tool, a
	// pattern of path.Match ("web_*"), or several separated by "|"
	// ("write_file|edit_file").
	Matcher string
	// Func decides.
	Func func(ctx context.Context, in HookInput) (HookDecision, error)
	// Timeout bounds one call of Func. Default: 30 seconds.
	Timeout time.Duration
}

// HookDecisionEvent is the payload of an agent's hook channel
// (calf.agent.{name}.hook): what the hooks of one event of a run decided,
// in order. Its message has the run's id and correlation id in its metadata, and
// the id "{run}.hook.{event}" for the events of the run
// (user_prompt_submit, session_start, stop, session_end), with the step
// for pre_compact ("{run}.hook.pre_compact.{step}"), or
// "{run}.hook.{event}.{step}.{tool_call_id}" for those of a tool call.
type HookDecisionEvent struct {
	Event HookEvent `json:"event"`
	// Step, ToolCallID and ToolName name the tool call, for the events of
	// a tool call.
	Step       int    `json:"step,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// Subagent is the agent of subagent_start and subagent_stop.
	Subagent  string       `json:"subagent,omitempty"`
	Decisions []HookRecord `json:"decisions"`
}

// hookChannel returns the channel of what an agent's hooks decided.
func hookChannel(agent string) string { return channelPrefix + agent + "." + suffixHook }

const suffixHook = "hook"

// hookID is the message id of the decisions of ev in run.
func hookID(run string, ev *HookDecisionEvent) string {
	id := run + ".hook." + string(ev.Event)
	switch {
	case ev.ToolCallID != "":
		id += "." + strconv.Itoa(ev.Step) + "." + ev.ToolCallID
	case ev.Event == HookPreCompact:
		id += "." + strconv.Itoa(ev.Step)
	}
	return id
}

// emitHookDecisions publishes what the hooks of ev.Event decided, if any
// ran, with md as the message's metadata.
func (h *handlers) emitHookDecisions(ctx context.Context, md calf.Metadata, ev HookDecisionEvent) error {
	if len(ev.Decisions) == 0 {
		return nil
	}
	_, err := h.rt.client.Emit(ctx, hookChannel(h.a.name), ev, calf.WithID(hookID(md.RunID, &ev)), calf.WithKey(md.RunID), calf.WithMetadata(md))
	if err != nil {
		return fmt.Errorf("agent %s: publish the %s hooks' decisions: %w", h.a.name, ev.Event, err)
	}
	return nil
}

// HookRecord is what one hook decided.
type HookRecord struct {
	Hook   string     `json:"hook"`
	Event  HookEvent  `json:"event"`
	Action HookAction `json:"action"`
	Reason string     `json:"reason,omitempty"`
	// Arguments, for a transform at pre_tool_use, are the arguments the
	// hook gave.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// checkHooks validates hooks, for New.
func checkHooks(hooks []Hook) error {
	for i, h := range hooks {
		switch {
		case h.Name == "":
			return fmt.Errorf("%w: hook %d has no name", ErrInvalidAgent, i)
		case !slices.Contains(hookEvents, h.Event):
			return fmt.Errorf("%w: hook %s: unknown event %q", ErrInvalidAgent, h.Name, h.Event)
		case h.Func == nil:
			return fmt.Errorf("%w: hook %s has no Func", ErrInvalidAgent, h.Name)
		}
		if err := checkPatterns(h.Matcher); err != nil {
			return fmt.Errorf("%w: hook %s: matcher %w", ErrInvalidAgent, h.Name, err)
		}
	}
	return nil
}

// matches reports whether h's matcher selects the tool name.
func (h *Hook) matches(name string) bool {
	return h.Matcher == "" || matchAny(name, h.Matcher)
}

// call runs h's function with its timeout, turning a panic into an error.
func (h *Hook) call(ctx context.Context, in HookInput) (HookDecision, error) {
	timeout := cmp.Or(h.Timeout, defaultHookTimeout)
	d, err := engine.CallWithin(ctx, timeout, func(ctx context.Context) (HookDecision, error) { return h.Func(ctx, in) })
	if errors.Is(err, engine.ErrTimedOut) {
		return HookDecision{}, fmt.Errorf("did not answer within %s", timeout)
	}
	return d, err
}

// hookOutcome is where the hooks of an event left a tool call.
type hookOutcome struct {
	args    json.RawMessage // pre_tool_use: the arguments to run with
	result  *tool.Result    // post_tool_use: the result to record
	prompt  string          // user_prompt_submit: the prompt to run
	denied  string          // the denial's text for the model, if denied
	ask     string          // pre_tool_use: why a hook asked for approval, if one did
	records []HookRecord
}

// runHooks runs the hooks of event that match in's tool, in order.
func (a *spec) runHooks(ctx context.Context, event HookEvent, in HookInput) hookOutcome {
	out := hookOutcome{args: in.Arguments, result: in.Result, prompt: in.Prompt}
	subject := in.ToolName
	switch event {
	case HookUserPromptSubmit, HookStop, HookSessionStart, HookSessionEnd, HookPreCompact:
		subject = in.Agent
	case HookSubagentStart, HookSubagentStop:
		subject = in.Subagent
	}
	for i := range a.opts.Hooks {
		h := &a.opts.Hooks[i]
		if h.Event != event || !h.matches(subject) {
			continue
		}
		in.Arguments, in.Result, in.Prompt = out.args, out.result, out.prompt
		d, err := h.call(ctx, in)
		if err == nil {
			err = d.check(event)
		}
		if err != nil {
			if ctx.Err() != nil {
				out.denied = ctx.Err().Error()
				return out
			}
			reason := fmt.Sprintf("the hook %s failed: %v", h.Name, err)
			out.records = append(out.records, HookRecord{Hook: h.Name, Event: event, Action: HookDeny, Reason: reason})
			out.denied = reason
			return out
		}
		if d.Action == "" {
			d.Action = HookAllow
		}
		rec := HookRecord{Hook: h.Name, Event: event, Action: d.Action, Reason: d.Reason}
		if d.Action == HookTransform && event == HookPreToolUse {
			rec.Arguments = d.Arguments
		}
		out.records = append(out.records, rec)
		if toldOnly(event) {
			continue // whatever it decides, the next hooks are told too
		}
		switch d.Action {
		case HookDeny:
			reason := d.Reason
			if reason == "" {
				reason = "no reason given"
			}
			switch event {
			case HookPreToolUse, HookSubagentStart:
				out.denied = fmt.Sprintf("the call was denied by %s: %s", h.Name, reason)
			case HookPostToolUse, HookSubagentStop:
				out.denied = fmt.Sprintf("the result was withheld by %s: %s", h.Name, reason)
			case HookPreCompact:
				out.denied = fmt.Sprintf("the compaction was denied by %s: %s", h.Name, reason)
			default:
				out.denied = fmt.Sprintf("the prompt was refused by %s: %s", h.Name, reason)
			}
			return out
		case HookTransform:
			switch event {
			case HookPreToolUse:
				out.args = d.Arguments
			case HookPostToolUse, HookSubagentStop:
				out.result = d.Result
			default:
				out.prompt = d.Prompt
			}
		case HookAsk:
			if out.ask == "" {
				out.ask = fmt.Sprintf("the hook %s asks: %s", h.Name, cmp.Or(d.Reason, "no reason given"))
			}
		case HookSkip:
			return out
		}
	}
	return out
}

// check reports a decision that cannot be carried out at event.
func (d HookDecision) check(event HookEvent) error {
	switch d.Action {
	case "", HookAllow, HookDeny, HookSkip:
		return nil
	case HookAsk:
		if event != HookPreToolUse && !toldOnly(event) {
			return fmt.Errorf("a %s hook cannot ask: only pre_tool_use hooks send calls to approval", event)
		}
		return nil
	case HookTransform:
		if toldOnly(event) {
			return nil // the decision is ignored
		}
		if event == HookPreCompact {
			return errors.New("a pre_compact hook cannot transform: it allows or denies the compaction")
		}
		if event == HookUserPromptSubmit || event == HookSubagentStart || event == HookSessionStart {
			if d.Prompt == "" {
				return errors.New("a transform of the prompt must give the new prompt")
			}
			return nil
		}
		if event == HookPreToolUse {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(d.Arguments, &obj); err != nil || obj == nil {
				return errors.New("a transform of the arguments must give them as a JSON object")
			}
			return nil
		}
		if d.Result == nil {
			return errors.New("a transform of the result must give the new result")
		}
		return nil
	}
	return fmt.Errorf("unknown action %q", d.Action)
}

// hasHooks reports whether the agent has a hook for event.
func (a *spec) hasHooks(event HookEvent) bool {
	for _, h := range a.opts.Hooks {
		if h.Event == event {
			return true
		}
	}
	return false
}

// mayAsk reports whether the agent's tool calls may wait for approval: it
// has permissions, or pre_tool_use hooks, which may answer [HookAsk].
func (a *spec) mayAsk() bool {
	return a.opts.Permissions != nil || a.hasHooks(HookPreToolUse) || a.step != nil
}
