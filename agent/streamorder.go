package agent

import (
	"errors"
	"strings"
	"time"
)

// streamEndGrace is how long RunStream waits, once a run's end has come,
// for the tool calls that its held events wait for: on a broker with a
// topic per channel they may come after the output, but a call that never
// comes must not hold up the end of the stream.
const streamEndGrace = 2 * time.Second

// errEndGraceOver reports that streamEndGrace passed.
var errEndGraceOver = errors.New("agent: stream end grace over")

// streamOrder restores causal order for RunStream. A tool call travels under
// its own key (so that the calls of a step run in parallel), and so may
// reach an observer before the inference of its step, before the deltas of
// its step, or after its result. streamOrder holds a tool call until the
// inference of its step and the deltas the call counts
// ([ToolCallEvent.Deltas]) have been yielded; a result, with every run
// event after it, until its call has been yielded; and the output until
// the deltas of its step have been yielded: once the run's end has come,
// for at most streamEndGrace. A delta is yielded as soon as the inference
// of its step has been.
type streamOrder struct {
	called map[string]bool
	step   int         // the last inference step yielded
	deltas map[int]int // deltas yielded, by step
	held   []Event     // events of the run's key waiting for a tool call or deltas
	early  []Event     // deltas waiting for their step's inference; tool calls, for it and its deltas
}

func newStreamOrder() *streamOrder {
	return &streamOrder{called: map[string]bool{}, deltas: map[int]int{}}
}

func (o *streamOrder) add(ev Event) []Event {
	if ev.Kind == EventToolCall || ev.Kind == EventDelta {
		o.early = append(o.early, ev)
	} else {
		o.held = append(o.held, ev)
	}
	return o.release()
}

// ended reports whether the run's end (its output or handoff) is held.
func (o *streamOrder) ended() bool {
	for _, ev := range o.held {
		if ev.Kind == EventOutput || ev.Kind == EventHandoff {
			return true
		}
	}
	return false
}

// flush returns every event held, the early tool calls and deltas first.
func (o *streamOrder) flush() []Event {
	out := o.early
	for _, c := range o.early {
		if c.Kind == EventToolCall {
			o.called[c.ToolCall.ToolCallID] = true
		}
	}
	out = append(out, o.held...)
	o.early, o.held = nil, nil
	return out
}

// release returns the early deltas and tool calls that are now due and
// the held events up to the first that must still wait.
func (o *streamOrder) release() []Event {
	var out []Event
	for {
		for again := true; again; {
			again = false
			rest := o.early[:0]
			for _, c := range o.early {
				switch {
				case c.Kind == EventDelta && c.Step <= o.step:
					o.deltas[c.Step]++
					out = append(out, c)
					again = true // a call may have waited for it
				case c.Kind == EventToolCall && c.Step <= o.step && o.deltas[c.Step] >= c.ToolCall.Deltas:
					o.called[c.ToolCall.ToolCallID] = true
					out = append(out, c)
				default:
					rest = append(rest, c)
				}
			}
			o.early = rest
		}
		if len(o.held) == 0 || !o.due(o.held[0]) {
			return out
		}
		ev := o.held[0]
		o.held = o.held[1:]
		out = append(out, ev)
		if ev.Kind == EventInference {
			o.step = max(o.step, ev.Step)
		}
	}
}

// due reports whether a held event may be yielded: a result once its call
// has been (an undispatched result has no call event), a subagent's start
// once the call that started it has been, a run's end once the deltas of
// its step have been.
func (o *streamOrder) due(ev Event) bool {
	switch ev.Kind {
	case EventToolResult:
		return o.called[ev.ToolResult.ToolCallID] || ev.ToolResult.Undispatched
	case EventSubagentSpawned:
		return o.called[ev.Subagent.ToolCallID]
	case EventApproval:
		// A subagent's request is not about a call of this run.
		// A custom step's request is about no tool call event.
		return ev.Approval.RunID != ev.RunID || o.called[ev.Approval.ToolCallID] || strings.HasPrefix(ev.Approval.ToolCallID, customCallPrefix)
	case EventHook:
		return ev.Hook.ToolCallID == "" || o.called[ev.Hook.ToolCallID]
	case EventCustom:
		return ev.Custom.ToolCallID == "" || o.called[ev.Custom.ToolCallID] || strings.HasPrefix(ev.Custom.ToolCallID, customCallPrefix)
	case EventOutput, EventHandoff:
		return o.deltas[ev.Step] >= ev.Output.Deltas
	}
	return true
}
