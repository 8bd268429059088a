package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
)

// DecodeEvent decodes a message of any agent's channels (see
// [AllChannels]) into the Event that RunStream would yield for it. A
// subagent_completed message is placed in the parent's run and step.
func DecodeEvent(m *calf.Message) (Event, error) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(m.Channel, channelPrefix), ".")
	ev := Event{Agent: name, RunID: m.Metadata.RunID, Message: m}
	kind, _, _ := strings.Cut(rest, ".")
	decode, ok := eventDecoders[kind]
	if !ok {
		return ev, fmt.Errorf("agent: unknown channel %s", m.Channel)
	}
	return ev, decode(m, &ev)
}

// An eventDecoder decodes the payload of a message into ev: its kind, its
// payload field and its step.
type eventDecoder func(m *calf.Message, ev *Event) error

// eventDecoders holds the decoder of each channel of an agent, by the
// channel's suffix.
var eventDecoders = map[string]eventDecoder{
	suffixInput: payloadDecoder(EventInput,
		func(ev *Event) **InputEvent { return &ev.Input }, func(*InputEvent) int { return 0 }),
	suffixInference: decodeInference,
	suffixStream:    decodeDelta,
	suffixToolCall: payloadDecoder(EventToolCall,
		func(ev *Event) **ToolCallEvent { return &ev.ToolCall }, func(p *ToolCallEvent) int { return p.Step }),
	suffixToolResult: payloadDecoder(EventToolResult,
		func(ev *Event) **ToolResultEvent { return &ev.ToolResult }, func(p *ToolResultEvent) int { return p.Step }),
	suffixOutput: decodeOutput,
	suffixApproval: payloadDecoder(EventApproval,
		func(ev *Event) **approval.Approval { return &ev.Approval }, func(p *approval.Approval) int { return p.Step }),
	suffixHook: payloadDecoder(EventHook,
		func(ev *Event) **HookDecisionEvent { return &ev.Hook }, func(p *HookDecisionEvent) int { return p.Step }),
	suffixPause: payloadDecoder(EventPause,
		func(ev *Event) **PauseEvent { return &ev.Pause }, func(p *PauseEvent) int { return p.Step }),
	suffixCustom: payloadDecoder(EventCustom,
		func(ev *Event) **CustomEvent { return &ev.Custom }, func(p *CustomEvent) int { return p.Step }),
	suffixContextCompacted: payloadDecoder(EventContextCompacted,
		func(ev *Event) **ContextCompactedEvent { return &ev.Compacted }, func(p *ContextCompactedEvent) int { return p.Step }),
	suffixSubagentSpawned: payloadDecoder(EventSubagentSpawned,
		func(ev *Event) **SubagentEvent { return &ev.Subagent }, func(p *SubagentEvent) int { return p.Step }),
	suffixSubagentCompleted: decodeSubagentCompleted,
}

// payloadDecoder is the decoder of a channel whose payload is a P that
// goes in the field of the event that field returns, its step that of
// step. The kind, the payload and the step are set even when the payload
// does not decode.
func payloadDecoder[P any](kind EventKind, field func(*Event) **P, step func(*P) int) eventDecoder {
	return func(m *calf.Message, ev *Event) error {
		p := new(P)
		ev.Kind, *field(ev) = kind, p
		err := m.Decode(p)
		ev.Step = step(p)
		return err
	}
}

// decodeInference decodes an inference message: its step, no payload.
func decodeInference(m *calf.Message, ev *Event) error {
	var p inferenceEvent
	err := m.Decode(&p)
	ev.Kind, ev.Step = EventInference, p.Step
	return err
}

// decodeDelta decodes a message of the stream channel into a delta event.
func decodeDelta(m *calf.Message, ev *Event) error {
	var p StreamEvent
	err := m.Decode(&p)
	ev.Kind, ev.Step, ev.Delta = EventDelta, p.Step, &p.Delta
	return err
}

// decodeOutput decodes an output message: a handoff event when the run
// handed off, an output event otherwise; its step is the run's last.
func decodeOutput(m *calf.Message, ev *Event) error {
	ev.Kind, ev.Output = EventOutput, new(OutputEvent)
	err := m.Decode(ev.Output)
	ev.Step = ev.Output.Steps
	if ev.Output.Status == OutputHandoff {
		ev.Kind = EventHandoff
	}
	return err
}

// decodeSubagentCompleted decodes a subagent's output as it comes back to
// its parent, placed in the parent's run and step by the output's Ref.
func decodeSubagentCompleted(m *calf.Message, ev *Event) error {
	ev.Kind, ev.Output = EventSubagentCompleted, new(OutputEvent)
	if err := m.Decode(ev.Output); err != nil {
		return err
	}
	var ref engine.SubagentRef
	if err := json.Unmarshal([]byte(ev.Output.Ref), &ref); err != nil {
		return err
	}
	ev.RunID, ev.Step = ref.Run, ref.Step
	ev.Subagent = &SubagentEvent{Step: ref.Step, ToolCallID: ref.Call, ToolName: ref.Tool, Agent: ev.Output.Agent, RunID: ev.Output.RunID}
	return nil
}
