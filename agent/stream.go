package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/model"
)

// EventKind is the kind of an [Event].
type EventKind string

// Event kinds, one per agent channel.
const (
	EventInput      EventKind = "input"
	EventInference  EventKind = "inference"
	EventDelta      EventKind = "delta"
	EventToolCall   EventKind = "tool_call"
	EventToolResult EventKind = "tool_result"
	EventOutput     EventKind = "output"
	// EventHandoff is the output of a run that handed off (Output.Status
	// "handoff", Output.Handoff the run that continues it). The stream
	// goes on with the events of that run.
	EventHandoff EventKind = "handoff"
	// EventSubagentSpawned: a tool call of the run started a subagent's
	// run (Subagent).
	EventSubagentSpawned EventKind = "subagent_spawned"
	// EventSubagentCompleted: a subagent's run ended (Subagent, and
	// Output, the subagent's output); its output becomes the tool's result.
	EventSubagentCompleted EventKind = "subagent_completed"
	// EventApproval: a tool call asks for a person's approval (Approval,
	// status pending), or the request was answered (approved or denied).
	EventApproval EventKind = "approval"
	// EventHook: what the hooks of one event of the run decided (Hook),
	// before the decisions take effect.
	EventHook EventKind = "hook"
	// EventContextCompacted: the run's context was compacted before the
	// model call of Step (Compacted); see [Options.Compaction].
	EventContextCompacted EventKind = "context_compacted"
	// EventPause: the run paused before the model call of Step, or was
	// resumed (Pause); see [Agent.Pause].
	EventPause EventKind = "pause"
	// EventCustom: a custom agent's step or a tool emitted an event
	// (Custom); see [RunContext.EmitEvent].
	EventCustom EventKind = "custom"
	// EventPartialOutput: the structured output as far as the model's
	// answer has streamed (Partial), after the delta that changed it. It
	// does not travel on the broker: [Agent.RunStream] of an agent with a
	// structured output type makes it from the text deltas.
	EventPartialOutput EventKind = "partial_output"
)

// Event is one event of a run, as [Agent.RunStream] yields it. One of the
// payload fields is set, according to Kind (two for subagent_completed).
type Event struct {
	Kind  EventKind
	Agent string
	RunID string
	// Step is the model call the event belongs to (0 for input).
	Step       int
	Input      *InputEvent
	Delta      *model.Delta
	ToolCall   *ToolCallEvent
	ToolResult *ToolResultEvent
	Output     *OutputEvent
	Subagent   *SubagentEvent
	// Approval is an approval request (status pending) or its answer.
	Approval *approval.Approval
	// Hook is what the hooks of one event decided.
	Hook *HookDecisionEvent
	// Compacted is a compaction of the run's context.
	Compacted *ContextCompactedEvent
	// Pause is a pause or a resume of the run.
	Pause *PauseEvent
	// Custom is an event a step or a tool emitted.
	Custom *CustomEvent
	// Partial is the structured output as far as it has streamed.
	Partial *PartialOutput
	// Message is the event as it travelled on the broker; nil for a
	// partial_output event, which did not.
	Message *calf.Message
}

// RunStream starts a run like [Agent.Run] and yields its events as they
// happen: the input, each inference, the model's text and tool-call deltas,
// the tool calls and their results, and last the output. An agent with a
// structured output type (see [NewTyped]) also yields, after a text
// delta that changes it, the output as far as it has streamed: a
// partial_output event whose [PartialOutput] holds a value of type Out
// with the fields streamed so far. The partial outputs of a step grow
// (a string value as it is written, a number, a literal or a key when
// whole), the last one is the answer as the model gave it, and they are
// not validated: the output event has the validated output. (A long
// answer makes one when it has grown by a 64th, and the last before the
// event that follows its step.) A run that fails
// yields its output event and then a *RunError. Stopping the iteration
// before the output cancels the run. Use [Agent.Wait] with the run id for
// the typed output.
//
// The starts and ends of subagent runs appear as subagent_spawned and
// subagent_completed events. A handoff appears as a handoff event, followed
// by the events of the run that continues the conversation (Event.Agent
// and Event.RunID say whose), up to the output of the last run of the
// chain. The stream follows handoffs to the agents that the handoff tools
// of this process's agents name.
//
// Events come in causal order: each step's inference, then its text and
// tool-call deltas, then its tool calls (after all of the step's deltas),
// each result after its call, and the output after the deltas of the last
// step. A chat UI can show them in the order yielded. On a broker with a
// topic per channel (Kafka), which does not order channels with each
// other, the deltas still come before their step's tool calls and output,
// and a result after its call; but the input and the inference events may
// come out of order with their neighbours on other channels.
// A tool call that has still not come two seconds after the run's output
// is not waited for: the events held for it are yielded, and
// [Agent.Wait] has the run's tool calls.
// A message of the run parked on the dead-letter channel ends the stream
// with an error matching [ErrRunParked]. A message that the broker
// delivers again (the same id on the same channel) is yielded once.
func (a *Agent[Out]) RunStream(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithTimeoutCause(ctx, a.opts.Timeout, fmt.Errorf("agent %s: run timed out after %s: %w", a.name, a.opts.Timeout, context.DeadlineExceeded))
		defer cancel()
		rt, err := a.onDemand(ctx, rt)
		if err != nil {
			yield(Event{}, err)
			return
		}
		msg, _, err := a.input(ctx, rt, prompt, opts, true, "")
		if err != nil {
			yield(Event{}, err)
			return
		}
		if _, span := rt.tel.Invoke(ctx, a.name, msg); span != nil {
			var ended *telemetry.Ended
			var failed error
			defer func() { telemetry.EndInvoke(span, ended, failed) }()
			inner := yield
			yield = func(ev Event, err error) bool {
				if err != nil {
					failed = err
				}
				if ev.Kind == EventOutput && ev.Output != nil {
					ended = &telemetry.Ended{Usage: ev.Output.Usage, Failed: ev.Output.Status == OutputFailed, Error: ev.Output.Error}
				}
				return inner(ev, err)
			}
		}
		id := msg.Metadata.RunID
		f, err := followChain(ctx, rt, a.reachable(), id)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer f.Close()
		if err := a.waitForWorkers(ctx, rt, id, opts); err != nil {
			yield(Event{}, err)
			return
		}
		if err := rt.publishInput(ctx, msg); err != nil {
			yield(Event{}, fmt.Errorf("agent %s: start run: %w", a.name, err))
			return
		}
		o := newChainOrder(id)
		// A broker delivers at least once: a message that comes again (the
		// same id on the same channel) is yielded once.
		seen := map[string]struct{}{}
		start := a.startCheck(rt, id, opts)
		// send yields evs, and reports whether the stream is over.
		partial := a.partials()
		send := func(evs []Event) bool {
			for _, ev := range evs {
				if p, ok := partial.flush(ev); ok && !yield(p, nil) {
					cancel()
					_ = a.abandon(ctx, rt, id)
					return true
				}
				if !yield(ev, nil) {
					if ev.Kind != EventOutput {
						cancel()
						_ = a.abandon(ctx, rt, id)
					}
					return true
				}
				if p, ok := partial.add(ev); ok && !yield(p, nil) {
					cancel()
					_ = a.abandon(ctx, rt, id)
					return true
				}
				if ev.Kind == EventOutput {
					if ev.Output.Status != OutputComplete {
						_, err := a.result(ctx, rt, id, ev.Output)
						yield(Event{}, err)
					}
					return true
				}
			}
			return false
		}
		for {
			var m *calf.Message
			if start.pending() {
				m, err = start.next(ctx, f)
			} else {
				m, err = o.Next(ctx, f)
			}
			if errors.Is(err, ErrNotServed) {
				yield(Event{}, a.notServed(ctx, rt, id, err))
				return
			}
			if errors.Is(err, engine.ErrEndGraceOver) {
				// The run has ended, and the tool calls its last events
				// wait for have not come: yield what is held.
				if send(o.Flush()) {
					return
				}
				continue
			}
			if err != nil {
				yield(Event{}, a.abandon(ctx, rt, id))
				return
			}
			if m.Channel == calf.DeadLetterChannel {
				if err := ParkedError(m, RunRef{Kind: "agent", Name: a.name, RunID: id}); err != nil {
					yield(Event{}, err)
					return
				}
				continue
			}
			if m.ID != "" {
				k := m.Channel + "\x00" + m.ID
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
			}
			ev, err := DecodeEvent(m)
			if err != nil {
				rt.log.Warn("agent: undecodable event in stream", "agent", a.name, "run", id, "err", err)
				continue
			}
			if send(o.Add(ev)) {
				return
			}
		}
	}
}
