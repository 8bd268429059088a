package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// RunOptions configures one run. A nil *RunOptions means the defaults.
type RunOptions[Deps any] struct {
	// Deps are dependencies that travel with the run, as JSON, to whichever
	// worker handles it. A worker that gives LocalDeps at Serve uses those
	// instead.
	Deps Deps
	// SessionID continues a conversation: the run sees the session's
	// history, and a completed run's messages are appended to it.
	SessionID string
	// RunID names the run. Default: a fresh id. Submitting the same run id
	// again does not start a second run: once the first has ended, the
	// caller gets its output.
	RunID string
	// Parts are further content of the user's message, such as images.
	Parts []model.Part
}

// Output is the result of a completed run.
type Output[Out any] struct {
	// Output is the agent's typed output.
	Output    Out
	RunID     string
	SessionID string
	// Messages are the messages the run added to the conversation: the
	// user's input, the assistant's responses and the tool results.
	Messages []model.Message
	// ToolCalls are the run's tool calls with their results.
	ToolCalls []ToolCallRecord
	Usage     model.Usage
	// Steps is the number of model calls made.
	Steps int
	// Duration is the time from the run's start to its end.
	Duration time.Duration
}

// Errors of a run. A *RunError matches one of them with errors.Is.
var (
	ErrRunFailed    = errors.New("agent: run failed")
	ErrRunCancelled = errors.New("agent: run cancelled")
)

// RunError reports a run that ended without output.
type RunError struct {
	Agent  string
	RunID  string
	Status RunStatus
	// Reason says why, as recorded in the run's state.
	Reason string
	// Err is the caller's context error for a cancelled run.
	Err error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("agent %s: run %s %s: %s", e.Agent, e.RunID, e.Status, e.Reason)
}

// Is matches ErrRunFailed or ErrRunCancelled.
func (e *RunError) Is(target error) bool {
	return (target == ErrRunFailed && e.Status == RunFailed) || (target == ErrRunCancelled && e.Status == RunCancelled)
}

// Unwrap returns the context error of a cancelled run.
func (e *RunError) Unwrap() error { return e.Err }

// Run starts a run with prompt as the user's message and waits for its
// output. The run is carried out by the handlers of whichever processes
// serve the agent on rt's broker, this one included if it called Serve.
// When ctx ends or the agent's Timeout passes first, the run is cancelled
// and Run returns a *RunError matching ErrRunCancelled and ctx's error.
func (a *Agent[Deps, Out]) Run(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions[Deps]) (*Output[Out], error) {
	ctx, cancel := context.WithTimeoutCause(ctx, a.opts.Timeout, fmt.Errorf("agent %s: run timed out after %s: %w", a.name, a.opts.Timeout, context.DeadlineExceeded))
	defer cancel()
	msg, err := a.input(ctx, rt, prompt, opts, false)
	if err != nil {
		return nil, err
	}
	id := msg.Metadata.RunID
	f, err := rt.client.Follow(ctx, OutputChannel(a.name), id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := rt.client.Publish(ctx, msg); err != nil {
		return nil, fmt.Errorf("agent %s: start run: %w", a.name, err)
	}
	m, err := f.Next(ctx)
	if err != nil {
		return nil, a.abandon(ctx, rt, id)
	}
	var ev OutputEvent
	if err := m.Decode(&ev); err != nil {
		return nil, err
	}
	return a.result(ctx, rt, id, &ev)
}

// Result returns the output of a finished run, read from the store: a
// *RunError for a run that failed or was cancelled, and an error matching
// store.ErrNotFound for an unknown run.
func (a *Agent[Deps, Out]) Result(ctx context.Context, rt *Runtime, runID string) (*Output[Out], error) {
	st, err := rt.LoadRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !st.Status.Terminal() {
		return nil, fmt.Errorf("agent %s: run %s is still %s", a.name, runID, st.Status)
	}
	return a.outputOf(st)
}

func (a *Agent[Deps, Out]) result(ctx context.Context, rt *Runtime, id string, ev *OutputEvent) (*Output[Out], error) {
	if ev.Status != OutputComplete {
		status := RunFailed
		if ev.Status == OutputCancelled {
			status = RunCancelled
		}
		return nil, &RunError{Agent: a.name, RunID: id, Status: status, Reason: ev.Error}
	}
	st, err := rt.LoadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.outputOf(st)
}

func (a *Agent[Deps, Out]) outputOf(st *RunState) (*Output[Out], error) {
	if st.Status != RunComplete {
		return nil, &RunError{Agent: a.name, RunID: st.RunID, Status: st.Status, Reason: st.Error}
	}
	o := &Output[Out]{
		RunID: st.RunID, SessionID: st.SessionID,
		Messages: st.NewMessages(), ToolCalls: st.ToolCalls,
		Usage: st.Usage, Steps: st.Step, Duration: st.EndedAt.Sub(st.StartedAt),
	}
	if err := json.Unmarshal(st.Output, &o.Output); err != nil {
		return nil, fmt.Errorf("agent %s: run %s: decode output: %w", a.name, st.RunID, err)
	}
	return o, nil
}

// input builds the input message of a new run.
func (a *Agent[Deps, Out]) input(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions[Deps], stream bool) (*calf.Message, error) {
	var o RunOptions[Deps]
	if opts != nil {
		o = *opts
	}
	id := o.RunID
	if id == "" {
		id = rt.newID()
	}
	in := InputEvent{Content: prompt, Parts: o.Parts, Stream: stream}
	if reflect.TypeFor[Deps]() != reflect.TypeFor[NoDeps]() {
		d, err := json.Marshal(o.Deps)
		if err != nil {
			return nil, fmt.Errorf("agent %s: dependencies of type %T cannot travel with the run (%v): give them to Serve as ServeOptions.LocalDeps instead", a.name, o.Deps, err)
		}
		in.Deps = d
	}
	msg, err := rt.client.NewMessage(ctx, InputChannel(a.name), in, calf.WithID(inputID(id)), calf.WithKey(id),
		calf.WithMetadata(calf.Metadata{CorrelationID: id, RunID: id}))
	if err != nil {
		return nil, err
	}
	msg.Metadata.SessionID = o.SessionID
	return msg, nil
}

// abandon cancels a run whose caller stopped waiting, and reports it.
func (a *Agent[Deps, Out]) abandon(ctx context.Context, rt *Runtime, id string) error {
	cause := context.Cause(ctx)
	reason := "the caller stopped waiting: " + cause.Error()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The run may not exist yet (its input not handled): then the
	// cancelled state is created, and the input handler will find it.
	var st *RunState
	_, err := store.Update(bg, rt.store, store.KindRun, id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			st = &RunState{RunID: id, Agent: a.name, Status: RunCancelled, Error: reason, StartedAt: rt.now(), EndedAt: rt.now()}
			return json.Marshal(st)
		}
		var err error
		if st, err = DecodeRunState(data); err != nil || st.Status.Terminal() {
			return nil, err
		}
		st.Status, st.Error, st.EndedAt = RunCancelled, reason, rt.now()
		return json.Marshal(st)
	})
	if err == nil && st.Status == RunCancelled {
		if eerr := rt.emitOutput(bg, st); eerr != nil {
			rt.log.Warn("agent: emit cancelled output", "agent", a.name, "run", id, "err", eerr)
		}
	}
	if st != nil && st.Status != RunCancelled {
		// The run ended just before the caller gave up.
		reason = fmt.Sprintf("the run ended (%s) but the caller stopped waiting: %v", st.Status, cause)
	}
	return &RunError{Agent: a.name, RunID: id, Status: RunCancelled, Reason: reason, Err: cause}
}

// validate turns the final response text into the output's JSON.
func (a *Agent[Deps, Out]) validate(text string) (json.RawMessage, error) {
	if a.output == nil {
		return json.Marshal(text)
	}
	raw := json.RawMessage(extractJSON(text))
	if !json.Valid(raw) {
		return nil, errors.New("the response is not valid JSON")
	}
	if err := a.output.Validate(raw); err != nil {
		return nil, err
	}
	v := raw
	if a.output.Wrapped() {
		var err error
		if v, err = a.output.Unwrap(raw); err != nil {
			return nil, err
		}
	}
	var out Out
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("the response does not decode: %v", err)
	}
	return v, nil
}

// extractJSON strips white space and a Markdown code fence around JSON.
func extractJSON(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[i+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	return s
}

// unknownTool is the error the model gets for a call of a tool the agent
// does not have.
func (a *Agent[Deps, Out]) unknownTool(name string) error {
	a.mu.RLock()
	names := a.tools.Names()
	a.mu.RUnlock()
	if len(names) == 0 {
		return fmt.Errorf("%w %q; this agent has no tools", tool.ErrUnknownTool, name)
	}
	return fmt.Errorf("%w %q; the tools are: %s", tool.ErrUnknownTool, name, strings.Join(names, ", "))
}

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
)

// Event is one event of a run, as [Agent.RunStream] yields it. Exactly one
// of the payload fields is set, according to Kind.
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
	// Message is the event as it travelled on the broker.
	Message *calf.Message
}

// RunStream starts a run like [Agent.Run] and yields its events as they
// happen: the input, each inference, the model's text and tool-call deltas,
// the tool calls and their results, and last the output. A run that fails
// yields its output event and then a *RunError. Stopping the iteration
// before the output cancels the run. Use [Agent.Result] with the run id for
// the typed output.
func (a *Agent[Deps, Out]) RunStream(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions[Deps]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithTimeoutCause(ctx, a.opts.Timeout, fmt.Errorf("agent %s: run timed out after %s: %w", a.name, a.opts.Timeout, context.DeadlineExceeded))
		defer cancel()
		msg, err := a.input(ctx, rt, prompt, opts, true)
		if err != nil {
			yield(Event{}, err)
			return
		}
		id := msg.Metadata.RunID
		f, err := rt.client.Follow(ctx, AllChannels(a.name), id)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer f.Close()
		if err := rt.client.Publish(ctx, msg); err != nil {
			yield(Event{}, fmt.Errorf("agent %s: start run: %w", a.name, err))
			return
		}
		o := &streamOrder{called: map[string]bool{}}
		for {
			m, err := f.Next(ctx)
			if err != nil {
				yield(Event{}, a.abandon(ctx, rt, id))
				return
			}
			ev, err := a.event(m)
			if err != nil {
				rt.log.Warn("agent: undecodable event in stream", "agent", a.name, "run", id, "err", err)
				continue
			}
			for _, ev := range o.add(ev) {
				if !yield(ev, nil) {
					if ev.Kind != EventOutput {
						cancel()
						_ = a.abandon(ctx, rt, id)
					}
					return
				}
				if ev.Kind == EventOutput {
					if ev.Output.Status != OutputComplete {
						_, err := a.result(ctx, rt, id, ev.Output)
						yield(Event{}, err)
					}
					return
				}
			}
		}
	}
}

// streamOrder restores causal order for RunStream. A tool call travels under
// its own key (so that the calls of a step run in parallel), and so may
// reach an observer before the inference of its step or after its result.
// streamOrder holds a tool call until the inference of its step has been
// yielded, and a result, with every run event after it (the output
// included), until its call has been yielded.
type streamOrder struct {
	called map[string]bool
	step   int     // the last inference step yielded
	held   []Event // events of the run's key waiting for a tool call
	early  []Event // tool calls whose step's inference is not yet yielded
}

func (o *streamOrder) add(ev Event) []Event {
	if ev.Kind == EventToolCall {
		if ev.Step > o.step {
			o.early = append(o.early, ev)
			return nil
		}
		o.called[ev.ToolCall.ToolCallID] = true
		return append([]Event{ev}, o.release()...)
	}
	o.held = append(o.held, ev)
	return o.release()
}

// release returns the held events up to the first result whose call has
// not been yielded (an undispatched result has no call event), with the
// early tool calls of each inference step it passes.
func (o *streamOrder) release() []Event {
	var out []Event
	for len(o.held) > 0 {
		ev := o.held[0]
		if ev.Kind == EventToolResult && !o.called[ev.ToolResult.ToolCallID] && !ev.ToolResult.Undispatched {
			break
		}
		out = append(out, ev)
		o.held = o.held[1:]
		if ev.Kind == EventInference {
			o.step = ev.Step
			rest := o.early[:0]
			for _, c := range o.early {
				if c.Step <= o.step {
					o.called[c.ToolCall.ToolCallID] = true
					out = append(out, c)
				} else {
					rest = append(rest, c)
				}
			}
			o.early = rest
		}
	}
	return out
}

func (a *Agent[Deps, Out]) event(m *calf.Message) (Event, error) {
	ev := Event{Agent: a.name, RunID: m.Metadata.RunID, Message: m}
	rest := strings.TrimPrefix(m.Channel, channelPrefix+a.name+".")
	kind, _, _ := strings.Cut(rest, ".")
	var err error
	switch kind {
	case suffixInput:
		ev.Kind, ev.Input = EventInput, new(InputEvent)
		err = m.Decode(ev.Input)
	case suffixInference:
		var p InferenceEvent
		err = m.Decode(&p)
		ev.Kind, ev.Step = EventInference, p.Step
	case suffixStream:
		var p StreamEvent
		err = m.Decode(&p)
		ev.Kind, ev.Step, ev.Delta = EventDelta, p.Step, &p.Delta
	case suffixToolCall:
		ev.Kind, ev.ToolCall = EventToolCall, new(ToolCallEvent)
		err = m.Decode(ev.ToolCall)
		ev.Step = ev.ToolCall.Step
	case suffixToolResult:
		ev.Kind, ev.ToolResult = EventToolResult, new(ToolResultEvent)
		err = m.Decode(ev.ToolResult)
		ev.Step = ev.ToolResult.Step
	case suffixOutput:
		ev.Kind, ev.Output = EventOutput, new(OutputEvent)
		err = m.Decode(ev.Output)
		ev.Step = ev.Output.Steps
	default:
		err = fmt.Errorf("agent: unknown channel %s", m.Channel)
	}
	return ev, err
}
