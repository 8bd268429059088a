package agent

import (
	"strings"

	"github.com/calf-go/calf/agent/internal/engine"
)

// newChainOrder returns the order that RunStream restores over the
// handoff chain that starts with the run first (see [engine.ChainOrder]).
func newChainOrder(first string) *engine.ChainOrder[Event] {
	return engine.NewChainOrder(first, orderOf)
}

// orderOf says how ev takes part in the order of a stream: a tool call
// counts the deltas of its step ([ToolCallEvent.Deltas]), and so does a
// run's end; a result waits for its call (an undispatched result has no
// call event), a subagent's start for the call that started it, and an
// approval request, a hook's event or a custom event for the call it is
// about, if it is one of this run's tool call events.
func orderOf(ev Event) engine.Ordered {
	o := engine.Ordered{Run: ev.RunID, Step: ev.Step}
	after := func(call string, now bool) {
		if !now {
			o.Kind, o.Call = engine.OrderAfterCall, call
		}
	}
	switch ev.Kind {
	case EventInference:
		o.Kind = engine.OrderInference
	case EventDelta:
		o.Kind = engine.OrderDelta
	case EventToolCall:
		o.Kind, o.Call, o.Deltas = engine.OrderCall, ev.ToolCall.ToolCallID, ev.ToolCall.Deltas
	case EventToolResult:
		after(ev.ToolResult.ToolCallID, ev.ToolResult.Undispatched)
	case EventSubagentSpawned:
		after(ev.Subagent.ToolCallID, false)
	case EventApproval:
		// A subagent's request is not about a call of this run.
		// A custom step's request is about no tool call event.
		after(ev.Approval.ToolCallID, ev.Approval.RunID != ev.RunID || strings.HasPrefix(ev.Approval.ToolCallID, engine.CustomCallPrefix))
	case EventHook:
		after(ev.Hook.ToolCallID, ev.Hook.ToolCallID == "")
	case EventCustom:
		after(ev.Custom.ToolCallID, ev.Custom.ToolCallID == "" || strings.HasPrefix(ev.Custom.ToolCallID, engine.CustomCallPrefix))
	case EventOutput, EventHandoff:
		o.Kind, o.Deltas = engine.OrderEnd, ev.Output.Deltas
		if ev.Kind == EventHandoff && ev.Output.Handoff != nil {
			o.HandsOffTo = ev.Output.Handoff.RunID
		}
	}
	return o
}
