package agent

import (
	"encoding/json"
	"time"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// Channel names of an agent. Every payload below is JSON; docs/channels.md
// describes them, and every channel of an agent
// (calf.agent.{name}.{channel}), for implementers in other languages. The
// functions exported here name the channels a program needs to talk to
// an agent over a broker without this package's runtime: where runs
// start ([InputChannel]), where their outputs and deltas come out
// ([OutputChannel], [StreamChannel]), and the pattern of them all
// ([AllChannels], whose messages [DecodeEvent] reads).
const (
	channelPrefix = "calf.agent."

	suffixInput      = "input"
	suffixInference  = "inference"
	suffixToolCall   = "tool_call"
	suffixToolResult = "tool_result"
	suffixStream     = "stream"
	suffixOutput     = "output"
)

// InputChannel returns the channel on which an agent receives new runs.
func InputChannel(agent string) string { return channelPrefix + agent + "." + suffixInput }

// inferenceChannel returns the channel that triggers the agent's next model call.
func inferenceChannel(agent string) string { return channelPrefix + agent + "." + suffixInference }

// ToolCallChannel returns the channel on which the agent calls its tool
// tool, with a [ToolCallEvent]: calf.agent.{agent}.tool_call.{tool}. A tool
// served in another process, or in another language, subscribes to it
// (see docs/channels.md).
func ToolCallChannel(agent, tool string) string {
	return channelPrefix + agent + "." + suffixToolCall + "." + tool
}

// toolResultChannel returns the channel on which tool results come back.
func toolResultChannel(agent string) string { return channelPrefix + agent + "." + suffixToolResult }

// StreamChannel returns the channel of streamed model deltas.
func StreamChannel(agent string) string { return channelPrefix + agent + "." + suffixStream }

// OutputChannel returns the channel of final outputs.
func OutputChannel(agent string) string { return channelPrefix + agent + "." + suffixOutput }

// AllChannels returns the pattern that matches every channel of an agent.
func AllChannels(agent string) string { return channelPrefix + agent + ".>" }

// InputEvent is the payload of the input channel. The message's metadata
// carries the run id (also the correlation id) and the session id.
type InputEvent struct {
	// Content is the user's message.
	Content string `json:"content"`
	// Parts are further content, such as images.
	Parts []model.Part `json:"parts,omitempty"`
	// Deps are the run's serialized dependencies, if any.
	Deps json.RawMessage `json:"deps,omitempty"`
	// Stream asks the inference handler to emit model deltas on the stream
	// channel.
	Stream bool `json:"stream,omitempty"`
	// ReplyTo, when set, asks for the run's output to be published there
	// too when the run ends. Submitting a run again with another ReplyTo
	// moves the reply to the new place.
	ReplyTo *ReplyTo `json:"reply_to,omitempty"`
	// Parent is the id of the run (of an agent, a team or a workflow) that
	// started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Messages, when set (or when Chain is), is the conversation the run
	// starts from, in place of the session's history: a handoff passes the
	// conversation this way, and so does a caller that keeps the
	// conversation itself ([RunOptions.Thread]). Such a run adds a user
	// message only when Content or Parts are not empty.
	Messages []model.Message `json:"messages,omitempty"`
	// Chain lists the runs that handed off, one to the next, to reach this
	// run, oldest first; see [Handoff].
	Chain []Hop `json:"chain,omitempty"`
	// Deadline, when set, ends the run with an error at the first step that
	// starts after it, and bounds its model and tool calls; see [AsTool].
	Deadline time.Time `json:"deadline,omitzero"`
	// MaxTurns, when positive, lowers the agent's maximum number of model
	// calls for this run.
	MaxTurns int `json:"max_turns,omitempty"`
	// Permissions, when set, replace the agent's for this run.
	Permissions *Permissions `json:"permissions,omitempty"`
	// Depth is how many subagent calls deep the run is: 0 for a run that
	// no agent's tool call started.
	Depth int `json:"depth,omitempty"`
	// Root is the run a caller started, for a subagent's run: its
	// approval requests show in that run's stream too.
	Root *approval.Root `json:"root,omitempty"`
	// Budget, when set, bounds what the run spends, in place of the
	// agent's; see [Budget].
	Budget *Budget `json:"budget,omitempty"`
	// Spent is what the runs before this one in its handoff chain spent.
	Spent *Spent `json:"spent,omitempty"`
}

// ReplyTo names where a run's output goes when the run ends (complete,
// failed or cancelled), besides the agent's output channel. A caller, a
// parent agent, a team or a workflow learns of the end by this event,
// without a goroutine waiting: its own handler receives the reply.
//
// The reply is an [OutputEvent] on Channel with message id
// "{run}.reply.{h}" (h: 16 hex digits of the FNV-1a hash of Channel, Key,
// CorrelationID and Ref, each followed by a zero byte),
// key Key and correlation id CorrelationID (the run id when empty); its
// run_id metadata is the run's id.
type ReplyTo struct {
	// Channel receives the reply.
	Channel string `json:"channel"`
	// Key is the reply's partition key, typically the parent's run id.
	Key string `json:"key,omitempty"`
	// CorrelationID is the reply's correlation id. Default: the run id.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Ref is opaque to the agent and echoed in [OutputEvent.Ref]: a tool
	// call id, a node name, whatever lets the parent place the reply.
	Ref string `json:"ref,omitempty"`
}

// inferenceEvent is the payload of the inference channel.
type inferenceEvent struct {
	// Step is the number of the model call to make, from 1.
	Step int `json:"step"`
}

// ToolCallEvent is the payload of a tool-call channel.
type ToolCallEvent struct {
	Step       int    `json:"step"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	// Arguments is the JSON text the model sent, exactly; it may be malformed.
	Arguments string `json:"arguments"`
	// Deltas is the number of stream deltas of the step (on the stream
	// channel, ids "{run}.stream.{step}.1" to "{run}.stream.{step}.{n}"),
	// all emitted before this call: an observer yields the call after
	// them. Zero when the run does not stream.
	Deltas int `json:"deltas,omitempty"`
}

// Tool result statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// ToolResultEvent is the payload of the tool-result channel.
type ToolResultEvent struct {
	Step       int    `json:"step"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	// Status is "success" or "error".
	Status string `json:"status"`
	// Result is what goes back to the model. For an error it holds the
	// error's text.
	Result *tool.Result `json:"result"`
	// Undispatched marks the result of a call that was never sent to a
	// tool (an unknown tool, or arguments over the size limit): no tool-call
	// event precedes it.
	Undispatched bool `json:"undispatched,omitempty"`
	// Handoff, when set, asks the run to hand off to another agent once
	// every tool call of the step has its result; see [HandoffTo].
	Handoff *HandoffRequest `json:"handoff,omitempty"`
	// Hooks is what the agent's hooks decided about the call, in order;
	// see [Hook].
	Hooks []HookRecord `json:"hooks,omitempty"`
	// Spent is what the run the call started (a subagent's) spent: the
	// calling run counts it as its own.
	Spent *Spent `json:"spent,omitempty"`
}

// StreamEvent is the payload of the stream channel: one delta of the
// model's response at Step. The n-th delta of a step has the message id
// "{run}.stream.{step}.{n}", from 1.
type StreamEvent struct {
	Step  int         `json:"step"`
	Delta model.Delta `json:"delta"`
}

// Output statuses.
const (
	OutputComplete  = "complete"
	OutputFailed    = "error"
	OutputCancelled = "cancelled"
	// OutputHandoff ends a run that handed the conversation to another
	// agent; [OutputEvent.Handoff] names the run that continues it.
	OutputHandoff = "handoff"
)

// OutputEvent is the payload of the output channel.
type OutputEvent struct {
	// Status is "complete", "error", "cancelled" or "handoff".
	Status string `json:"status"`
	// Content is the output: a JSON string for text agents, the JSON value
	// for agents with a structured output type.
	Content json.RawMessage `json:"content,omitempty"`
	// Error explains a failed or cancelled run.
	Error string      `json:"error,omitempty"`
	Usage model.Usage `json:"usage"`
	// Cost is what the run's model calls cost (see [Output.Cost]); Usage
	// counts the same calls.
	Cost model.Cost `json:"cost"`
	// Steps is the number of model calls made.
	Steps int `json:"steps"`
	// RunID and Agent name the run that ended: after handoffs, the last
	// run of the chain, whose agent produced the output.
	RunID string `json:"run_id,omitempty"`
	Agent string `json:"agent,omitempty"`
	// Chain lists the runs that handed off, one to the next, to reach
	// this run, oldest first; empty when no handoff led to it.
	Chain []Hop `json:"chain,omitempty"`
	// Ref echoes [ReplyTo.Ref] in a reply.
	Ref string `json:"ref,omitempty"`
	// Handoff names the run that continues a run that handed off.
	Handoff *Hop `json:"handoff,omitempty"`
	// Deltas is the number of stream deltas of the last step, all emitted
	// before this event (see [ToolCallEvent.Deltas]).
	Deltas int `json:"deltas,omitempty"`
	// Guardrail, for a run a guardrail ended, says which, and why.
	Guardrail *GuardrailTrip `json:"guardrail,omitempty"`
	// NotServed, for a run that did not complete, says that no process
	// serves its agent, or the agent of a run it started (a subagent, the
	// run a handoff continues into): Error names which.
	NotServed bool `json:"not_served,omitempty"`
}

// Text returns the output as text: Content decoded when it is a JSON
// string (a text agent's answer), else Content's JSON as it is (a
// structured output), or "" when there is none.
func (e OutputEvent) Text() string {
	var s string
	if len(e.Content) > 0 && e.Content[0] == '"' && json.Unmarshal(e.Content, &s) == nil {
		return s
	}
	return string(e.Content)
}

// String returns what a person reading the event wants: the output's text
// (see [OutputEvent.Text]) for a complete run, else the status and the
// error ("error: the model failed"), or the run that a handoff continues.
func (e OutputEvent) String() string {
	switch {
	case e.Status == OutputComplete:
		return e.Text()
	case e.Status == OutputHandoff && e.Handoff != nil:
		return "handoff to " + e.Handoff.Agent + " (run " + e.Handoff.RunID + ")"
	case e.Error != "":
		return e.Status + ": " + e.Error
	}
	return e.Status
}
