package agent

import (
	"encoding/json"
	"strconv"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// Channel names of an agent. Every payload below is JSON; docs/channels.md
// describes them for implementers in other languages.
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

// InferenceChannel returns the channel that triggers the agent's next model call.
func InferenceChannel(agent string) string { return channelPrefix + agent + "." + suffixInference }

// ToolCallChannel returns the channel on which the agent's tool is called.
func ToolCallChannel(agent, tool string) string {
	return channelPrefix + agent + "." + suffixToolCall + "." + tool
}

// ToolResultChannel returns the channel on which tool results come back.
func ToolResultChannel(agent string) string { return channelPrefix + agent + "." + suffixToolResult }

// StreamChannel returns the channel of streamed model deltas.
func StreamChannel(agent string) string { return channelPrefix + agent + "." + suffixStream }

// OutputChannel returns the channel of final outputs.
func OutputChannel(agent string) string { return channelPrefix + agent + "." + suffixOutput }

// AllChannels returns the pattern that matches every channel of an agent.
func AllChannels(agent string) string { return channelPrefix + agent + ".>" }

// Deterministic event ids: a re-emitted event has the id of the original.
func inputID(run string) string { return run + ".input" }
func inferenceID(run string, step int) string {
	return run + ".inference." + strconv.Itoa(step)
}
func toolCallID(run string, step int, call string) string {
	return run + ".tool_call." + strconv.Itoa(step) + "." + call
}
func toolResultID(run string, step int, call string) string {
	return run + ".tool_result." + strconv.Itoa(step) + "." + call
}
func streamID(run string, step, n int) string {
	return run + ".stream." + strconv.Itoa(step) + "." + strconv.Itoa(n)
}
func outputID(run string) string { return run + ".output" }

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
}

// InferenceEvent is the payload of the inference channel.
type InferenceEvent struct {
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
}

// StreamEvent is the payload of the stream channel.
type StreamEvent struct {
	Step  int         `json:"step"`
	Delta model.Delta `json:"delta"`
}

// Output statuses.
const (
	OutputComplete  = "complete"
	OutputFailed    = "error"
	OutputCancelled = "cancelled"
)

// OutputEvent is the payload of the output channel.
type OutputEvent struct {
	// Status is "complete", "error" or "cancelled".
	Status string `json:"status"`
	// Content is the output: a JSON string for text agents, the JSON value
	// for agents with a structured output type.
	Content json.RawMessage `json:"content,omitempty"`
	// Error explains a failed or cancelled run.
	Error string      `json:"error,omitempty"`
	Usage model.Usage `json:"usage"`
	// Steps is the number of model calls made.
	Steps int `json:"steps"`
}
