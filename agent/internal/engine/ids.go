package engine

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

// The ids of a run's events are derived from the run, the step and the
// tool call, so that an event emitted again (by a handler that sees its
// message twice, or by recovery) has the id of the original.

// InputID is the id of the input event of run.
func InputID(run string) string { return run + ".input" }

// InferenceID is the id of the inference event of step of run.
func InferenceID(run string, step int) string {
	return run + ".inference." + strconv.Itoa(step)
}

// ToolCallID is the id of the event of tool call call of step of run.
func ToolCallID(run string, step int, call string) string {
	return run + ".tool_call." + strconv.Itoa(step) + "." + call
}

// ToolResultID is the id of the result event of tool call call of step
// of run.
func ToolResultID(run string, step int, call string) string {
	return run + ".tool_result." + strconv.Itoa(step) + "." + call
}

// StreamID is the id of delta n of step of run.
func StreamID(run string, step, n int) string {
	return run + ".stream." + strconv.Itoa(step) + "." + strconv.Itoa(n)
}

// OutputID is the id of the output event of run.
func OutputID(run string) string { return run + ".output" }

// ReplyID is the id of run's reply to the destination named by its
// channel, key, correlation id and reference: one id per destination, so
// that a broker that drops repeated ids within a window still delivers
// the answer to a caller that submitted the run again from elsewhere.
func ReplyID(run, channel, key, correlationID, ref string) string {
	h := fnv.New64a()
	for _, s := range []string{channel, key, correlationID, ref} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s.reply.%016x", run, h.Sum64())
}

// HandoffRunID is the id of the run that continues the n-th handoff of
// the chain whose first run is first.
func HandoffRunID(first string, n int) string {
	return first + ".handoff." + strconv.Itoa(n)
}

// SubagentRunID is the id of the subagent run that the tool call callID
// of the run parent starts.
func SubagentRunID(parent, callID string) string { return parent + "/" + callID }
