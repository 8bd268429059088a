package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// ServeOptions configures [Agent.Serve]. A nil *ServeOptions means the
// defaults.
type ServeOptions struct {
	// LocalDeps, when set, provides the dependencies of every run handled
	// by this process, in place of any that travelled with the run: a
	// value made by [Deps.Value]. Use it for what cannot be serialized:
	// database handles, HTTP clients, credentials that must not be written
	// to the broker or the store.
	LocalDeps func() DepsValue
	// Concurrency bounds how many runs (and tool calls) each handler works
	// on at once. Zero means the broker's default.
	Concurrency int
	// MaxAttempts bounds deliveries of a message whose handling fails on
	// infrastructure errors (an unreachable store, say) before it is
	// dead-lettered. Zero means the broker's default.
	MaxAttempts int
}

// Serve subscribes the agent's handlers on rt: inference, tool results,
// one subscription per tool, and last the input. Several processes may serve the
// same agent: they share the work through the broker's consumer groups.
// The subscriptions last until the runtime's client shuts down. The
// agent's tools are fixed from then on: [Agent.AddTool] refuses. On a
// runtime that serves on demand ([RuntimeOptions.ServeOnDemand]), Run,
// RunStream and Submit then do not serve the agent again, and the agents
// its runs may delegate to (its handoff targets and subagents, and
// theirs, when they are agents of this process) are served with it. A nil rt
// returns an error matching [ErrNoRuntime].
func (a *Agent[Out]) Serve(ctx context.Context, rt *Runtime, opts *ServeOptions) error {
	if rt == nil {
		return fmt.Errorf("agent %s: serve: %w", a.name, ErrNoRuntime)
	}
	if err := a.serveLocked(ctx, rt, opts); err != nil {
		return err
	}
	if rt.serveOnDemand {
		// What its runs delegate to is served on demand too.
		return serveDelegates(ctx, rt, a)
	}
	return nil
}

// serveLocked is serve under the agent's served lock, recording rt.
func (a *Agent[Out]) serveLocked(ctx context.Context, rt *Runtime, opts *ServeOptions) error {
	return a.served.Serve(rt, func() error { return a.serve(ctx, rt, opts) })
}

// serve is Serve on rt, which is not nil.
func (a *Agent[Out]) serve(ctx context.Context, rt *Runtime, opts *ServeOptions) error {
	rt.ServeTimers()
	h := &handlers{
		a: &a.spec, rt: rt, guards: a.guardrailSets(),
		calls: engine.NewFlights[unsavedResult](engine.MaxUnrecorded), steps: engine.NewFlights[unsavedResponse](engine.MaxUnrecorded),
		claims: engine.NewClaims(rt.client.Broker(), rt.store, rt.now),
	}
	if opts != nil {
		h.opts = *opts
	}
	h.stages = h.inferenceStages()
	// Observers elsewhere follow the agent's channels by pattern: create
	// them now on brokers that keep a resource per channel, so that the
	// first run's events are not missed.
	a.mu.Lock()
	a.serving = true // the tools are fixed from now on: see AddTool
	names := a.tools.Names()
	a.mu.Unlock()
	channels := []string{InputChannel(a.name), inferenceChannel(a.name), toolResultChannel(a.name), StreamChannel(a.name), OutputChannel(a.name), pauseChannel(a.name)}
	for _, ts := range a.opts.Toolsets {
		names = append(names, ts.Name())
	}
	for _, name := range names {
		channels = append(channels, ToolCallChannel(a.name, name))
	}
	if a.opts.Compaction != nil {
		channels = append(channels, contextCompactedChannel(a.name))
	}
	if err := calf.CreateChannels(ctx, rt.client.Broker(), channels...); err != nil {
		return fmt.Errorf("agent %s: serve: create channels: %w", a.name, err)
	}
	sub := func(pattern string, fn calf.Handler) error {
		if t := rt.tel; t.MeasuresLag() {
			inner := fn
			fn = func(ctx context.Context, m *calf.Message) error {
				t.Handled(ctx, m, rt.now())
				return inner(ctx, m)
			}
		}
		return rt.client.Handle(ctx, pattern, fn, &calf.SubscribeOptions{
			Group: pattern, Concurrency: h.opts.Concurrency, MaxAttempts: h.opts.MaxAttempts,
		})
	}
	if err := sub(inferenceChannel(a.name), h.onInference); err != nil {
		return fmt.Errorf("agent %s: serve: %w", a.name, err)
	}
	if err := sub(toolResultChannel(a.name), h.onToolResult); err != nil {
		return fmt.Errorf("agent %s: serve: %w", a.name, err)
	}
	if a.hasSubagents() {
		if err := sub(subagentCompletedChannel(a.name), h.onSubagentCompleted); err != nil {
			return fmt.Errorf("agent %s: serve: %w", a.name, err)
		}
	}
	if len(a.opts.Hooks) > 0 {
		if err := calf.CreateChannels(ctx, rt.client.Broker(), hookChannel(a.name)); err != nil {
			return fmt.Errorf("agent %s: serve: create channels: %w", a.name, err)
		}
	}
	if a.mayAsk() {
		if err := calf.CreateChannels(ctx, rt.client.Broker(), approval.Channel(a.name)); err != nil {
			return fmt.Errorf("agent %s: serve: create channels: %w", a.name, err)
		}
		if err := sub(approval.Channel(a.name), h.onApproval); err != nil {
			return fmt.Errorf("agent %s: serve: %w", a.name, err)
		}
	}
	for _, name := range names {
		if err := sub(ToolCallChannel(a.name, name), h.onToolCall); err != nil {
			return fmt.Errorf("agent %s: serve tool %s: %w", a.name, name, err)
		}
	}
	// Toolsets that hold resources (an MCP server's process or
	// connection) release them when the runtime's client shuts down.
	for _, ts := range a.opts.Toolsets {
		if c, ok := ts.(io.Closer); ok {
			rt.client.OnShutdown(func() { _ = c.Close() })
		}
	}
	// The input handler comes last: a process is seen serving the agent
	// (see [calf.GroupInspector]) only once every handler of a run is
	// subscribed, so no event of a run it takes goes unheard.
	input := calf.Handler(h.onInput)
	if a.opts.Flow != nil {
		var err error
		if input, err = rt.FlowGate(ctx, "agent", a.name, a.opts.Flow, input, inputPrompt); err != nil {
			return fmt.Errorf("agent %s: serve: %w", a.name, err)
		}
	}
	if err := sub(InputChannel(a.name), input); err != nil {
		return fmt.Errorf("agent %s: serve: %w", a.name, err)
	}
	return nil
}

type handlers struct {
	a    *spec
	rt   *Runtime
	opts ServeOptions
	// calls are the tool calls in hand, one delivery of a call acting at
	// a time, with their results until they are recorded; steps the same
	// for the model calls of runs' steps (engine.Flights).
	calls *engine.Flights[unsavedResult]
	steps *engine.Flights[unsavedResponse]
	// claims, on a broker that may deliver a message to another process,
	// tell a delivery that another live process has a call in hand
	// (engine.Claims); nil otherwise.
	claims *engine.Claims
	// stages are the agent's inference stages, in order, and guards its
	// guardrails as the stages check them: both fixed when it is served.
	stages []inferenceStage
	guards guardrailSets
}

// runID returns the run a message belongs to.
func runID(msg *calf.Message) (string, error) {
	if msg.Metadata.RunID == "" {
		return "", calf.Permanent(fmt.Errorf("agent: message %s on %s has no run id", msg.ID, msg.Channel))
	}
	return msg.Metadata.RunID, nil
}

func (h *handlers) emit(ctx context.Context, channel string, data any, id, key string) error {
	_, err := h.rt.client.Emit(ctx, channel, data, calf.WithID(id), calf.WithKey(key))
	return err
}

// onInput creates the run's state from the input and the session's history,
// then asks for the first model call.
func (h *handlers) onInput(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	var in InputEvent
	if err := msg.Decode(&in); err != nil {
		return calf.Permanent(err)
	}
	// user_prompt_submit hooks see a prompt before the run exists; a
	// handoff's input continues a conversation already submitted.
	var refused string
	if len(in.Chain) == 0 {
		if refused, err = h.promptHooks(ctx, msg, id, &in); err != nil {
			return err
		}
	}
	var st *runState
	var session *sessionstore.Record // as read for the run's history
	var sessionVersion int64
	// A run is usually new: create it without reading it first.
	err = h.rt.runs.Create(ctx, id, func(data []byte, exists bool) ([]byte, *runState, error) {
		var pause *PauseState
		if exists {
			var err error
			if st, err = decodeRunState(data); err != nil {
				return nil, nil, err
			}
			if st.Step == 0 && st.Status == RunRunning {
				// Paused before its input was handled: start it, paused.
				pause, exists = st.Pause, false
			}
		}
		if exists {
			if in.ReplyTo == nil || (st.ReplyTo != nil && *st.ReplyTo == engine.ReplyTo(*in.ReplyTo)) {
				return nil, nil, nil
			}
			// Submitted again by another caller: the reply goes to it.
			st.ReplyTo = (*engine.ReplyTo)(in.ReplyTo)
			out, err := st.encode()
			return out, nil, err
		}
		var history []model.Message
		var ref *engine.HistoryRef
		var compacted *compaction.Record
		var sessionBudget *Budget
		var sessionSpent *Spent
		if in.Messages != nil || len(in.Chain) > 0 {
			history = in.Messages // a handoff: the conversation so far
		} else if sid := msg.Metadata.SessionID; sid != "" {
			r, version, err := h.rt.sessions.Get(ctx, sid)
			if err == nil {
				history, err = h.rt.sessions.Messages(ctx, r)
			}
			switch {
			case err == nil:
				session, sessionVersion = r, version
				compacted = r.Compacted
				if len(history) > 0 {
					ref = &engine.HistoryRef{Session: sid, Epoch: r.Epoch}
				}
				if r.Budget != nil {
					sessionBudget, sessionSpent = (*Budget)(r.Budget), &Spent{Usage: r.Usage, Cost: r.Cost}
				}
			case !errors.Is(err, store.ErrNotFound):
				return nil, nil, err
			}
		}
		msgs := history[:len(history):len(history)]
		if (len(in.Chain) == 0 && in.Messages == nil) || in.Content != "" || len(in.Parts) > 0 {
			msgs = append(msgs, model.Message{Role: model.RoleUser, Parts: append([]model.Part{model.TextPart(in.Content)}, in.Parts...)})
		}
		st = &runState{
			RunID: id, Agent: h.a.name, SessionID: msg.Metadata.SessionID,
			Status: RunRunning, Phase: phaseInference, Step: 1,
			Transcript: engine.Transcript{Messages: msgs, HistoryLen: len(history), History: ref, Compacted: compacted},
			Deps:       in.Deps, Stream: in.Stream,
			Lineage:  engine.Lineage{ReplyTo: (*engine.ReplyTo)(in.ReplyTo), Parent: in.Parent, Chain: engineHops(in.Chain)},
			Deadline: in.Deadline, MaxTurns: in.MaxTurns, Depth: in.Depth, Permissions: in.Permissions, Root: in.Root,
			StartedAt: msg.Metadata.Time, Pause: pause,
			Budget: cmp.Or(in.Budget, h.a.opts.Budget), Inherited: in.Spent,
			SessionBudget: sessionBudget, SessionSpent: sessionSpent,
		}
		if c := msg.Metadata.CorrelationID; c != "" && c != id {
			st.Correlation = c
		}
		if refused != "" {
			st.Status, st.Error, st.EndedAt = RunFailed, refused, h.rt.now()
		}
		if err := h.rt.archive(ctx, st); err != nil {
			return nil, nil, err
		}
		out, err := st.encode()
		return out, st, err
	})
	if err != nil {
		return err
	}
	if st.SessionID != "" && st.Status == RunRunning {
		if err := h.rt.startSessionRun(ctx, st, in.Content, session, sessionVersion); err != nil {
			return err
		}
	}
	switch {
	case st.Status.Terminal():
		// The run was submitted again after it ended: answer with its output.
		return h.finish(ctx, st)
	case st.Status == RunRunning && st.Step == 1 && st.Phase == phaseInference:
		if err := h.rt.StartDeadline(ctx, RunRef{Kind: "agent", Name: h.a.name, RunID: id}, st.Deadline); err != nil {
			return err
		}
		return h.emit(ctx, inferenceChannel(h.a.name), inferenceEvent{Step: 1}, engine.InferenceID(id, 1), id)
	}
	return nil
}

// deps returns the dependencies of st's run for its RunContext: the
// worker's LocalDeps, or the JSON that travelled with the run, which
// [Deps.Of] decodes; nil when there are none.
func (h *handlers) deps(st *runState) *runDeps {
	if h.opts.LocalDeps != nil {
		v := h.opts.LocalDeps()
		return &runDeps{local: &v}
	}
	if len(st.Deps) == 0 {
		return nil
	}
	return &runDeps{raw: st.Deps}
}

// request makes the model request of the run st's step. Its error is
// the instructions' (Options.InstructionsFunc).
func (h *handlers) request(rc RunContext, st *runState) (*model.Request, error) {
	o := &h.a.opts
	req := &model.Request{
		Tools:       h.a.toolDefinitions(rc, h.rt.log, h.permissions(st)),
		ToolChoice:  o.ToolChoice,
		Temperature: o.Temperature,
		MaxTokens:   o.MaxTokens,
	}
	if o.SequentialTools && len(req.Tools) > 0 {
		f := false
		req.ParallelToolCalls = &f
	}
	instr := o.Instructions
	if o.InstructionsFunc != nil {
		var err error
		if instr, err = o.InstructionsFunc(rc); err != nil {
			return nil, err
		}
	}
	view := st.View()
	req.Messages = make([]model.Message, 0, len(view)+1)
	if instr != "" {
		req.Messages = append(req.Messages, model.SystemMessage(instr))
	}
	req.Messages = append(req.Messages, view...)
	if h.a.output != nil {
		req.Output = &model.OutputSchema{Name: "output", Schema: h.a.output.JSON()}
	}
	return req, nil
}

// requestFailed handles the error of request: an outage is returned, for
// the step to be retried; any other error fails the run.
func (h *handlers) requestFailed(ctx context.Context, st *runState, err error) error {
	if calf.IsUnavailable(err) {
		return err
	}
	return h.fail(ctx, st.RunID, "instructions: "+err.Error())
}

// callModel calls the model with the agent's timeout, streaming deltas on
// the stream channel when the run asked for them. It returns the response
// and the number of deltas emitted.
func (h *handlers) callModel(ctx context.Context, st *runState, req *model.Request) (*model.Response, int, error) {
	if h.a.model == nil {
		return nil, 0, fmt.Errorf("agent %s: %w", h.a.name, model.ErrNoModel)
	}
	var delta func(int, model.Delta) bool
	if st.Stream {
		delta = func(n int, d model.Delta) bool {
			err := h.emit(ctx, StreamChannel(h.a.name), StreamEvent{Step: st.Step, Delta: d}, engine.StreamID(st.RunID, st.Step, n+1), st.RunID)
			if err != nil {
				h.rt.log.Warn("agent: emit stream delta", "agent", h.a.name, "run", st.RunID, "err", err)
			}
			return err == nil
		}
	}
	return engine.CallModel(ctx, h.a.model, req, h.within(st, h.a.opts.ModelTimeout), delta)
}

// record applies a model response, for which deltas stream deltas were
// emitted, to the run's state.
func (h *handlers) record(st *runState, resp *model.Response, deltas int) {
	st.Deltas = deltas
	u := resp.Usage
	if u.Requests == 0 {
		u.Requests = 1
	}
	st.Usage = st.Usage.Add(u)
	st.Cost = st.Cost.Add(h.rt.prices.CostOf(cmp.Or(resp.Model, h.a.model.Name()), u))
	m := resp.Message
	m.Role = model.RoleAssistant
	engine.UniqueCallIDs(st.Step, m.ToolCalls, st.ToolCalls, func(r ToolCallRecord) string { return r.ID })
	st.Messages = append(st.Messages, m)
	st.AdvancedBy = ""
	if len(m.ToolCalls) > 0 {
		st.Phase = phaseTools
		st.Pending = make([]pendingCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			st.Pending[i] = pendingCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		}
		return
	}
	out, err := h.a.validate(m.Text())
	switch {
	case err == nil:
		st.Status, st.Output, st.EndedAt = RunComplete, out, h.rt.now()
	case st.Repairs < h.a.opts.MaxRepairs:
		st.Repairs++
		st.Messages = append(st.Messages, model.UserMessage(fmt.Sprintf(
			"Your response is not valid output: %v\nReply again with only a JSON value that follows the required schema.", err)))
		st.Step++
		st.Deltas = 0
		st.Phase = phaseInference
	default:
		st.Status, st.EndedAt = RunFailed, h.rt.now()
		st.Error = fmt.Sprintf("invalid output after %d repair attempts: %v", st.Repairs, err)
	}
}

// next emits what the recorded state calls for. It is safe to call again
// for the same state: every event has a deterministic id.
func (h *handlers) next(ctx context.Context, st *runState) error {
	switch {
	case st.Status.Terminal():
		return h.finish(ctx, st)
	case st.Phase == phaseInference:
		return h.emit(ctx, inferenceChannel(h.a.name), inferenceEvent{Step: st.Step}, engine.InferenceID(st.RunID, st.Step), st.RunID)
	}
	limit := h.rt.client.MaxMessageSize()
	for _, p := range st.Pending {
		if p.Result != nil {
			continue
		}
		var err error
		_, channel, known := h.a.lookup(ctx, p.Name)
		switch {
		case !known:
			err = h.emitResult(ctx, st.RunID, undispatched(st.Step, p, h.a.unknownTool(p.Name)))
		case len(p.Arguments) > limit-1024:
			err = h.emitResult(ctx, st.RunID, undispatched(st.Step, p, fmt.Errorf("arguments of %d bytes exceed the limit of %d", len(p.Arguments), limit-1024)))
		default:
			ev := ToolCallEvent{Step: st.Step, ToolCallID: p.ID, ToolName: p.Name, Arguments: p.Arguments, Deltas: st.Deltas}
			err = h.emit(ctx, ToolCallChannel(h.a.name, channel), ev, engine.ToolCallID(st.RunID, st.Step, p.ID), st.RunID+"/"+p.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func errorResult(step int, p pendingCall, err error) ToolResultEvent {
	return ToolResultEvent{Step: step, ToolCallID: p.ID, ToolName: p.Name, Status: StatusError, Result: tool.ErrorResult(err)}
}

// undispatched is the error result of a call that is not sent to a tool.
func undispatched(step int, p pendingCall, err error) ToolResultEvent {
	ev := errorResult(step, p, err)
	ev.Undispatched = true
	return ev
}

func (h *handlers) emitResult(ctx context.Context, run string, ev ToolResultEvent) error {
	return h.emit(ctx, toolResultChannel(h.a.name), ev, engine.ToolResultID(run, ev.Step, ev.ToolCallID), run)
}

// fail marks the run failed (unless it has ended already) and emits its
// output.
func (h *handlers) fail(ctx context.Context, id, reason string) error {
	return h.failed(ctx, id, reason, false)
}

// failed is fail, marking the run [runState.NotServed] when notServed.
func (h *handlers) failed(ctx context.Context, id, reason string, notServed bool) error {
	st, err := h.rt.runs.Update(ctx, id, func(st *runState) (bool, error) {
		if st.Status.Terminal() {
			return false, nil
		}
		st.Status, st.Error, st.EndedAt, st.NotServed = RunFailed, reason, h.rt.now(), notServed
		return true, nil
	})
	if err != nil {
		return err
	}
	return h.finish(ctx, st)
}

// promptHooks runs the user_prompt_submit hooks, then, for a run in a
// session, the session_start hooks, on the prompt of a run that starts,
// and publishes their decisions. It returns why the prompt was refused,
// if it was.
func (h *handlers) promptHooks(ctx context.Context, msg *calf.Message, id string, in *InputEvent) (refused string, err error) {
	md := calf.Metadata{CorrelationID: cmp.Or(msg.Metadata.CorrelationID, id), RunID: id, SessionID: msg.Metadata.SessionID}
	hin := HookInput{Event: HookUserPromptSubmit, Agent: h.a.name, RunID: id, SessionID: md.SessionID, Prompt: in.Content}
	for _, event := range []HookEvent{HookUserPromptSubmit, HookSessionStart} {
		if !h.a.hasHooks(event) || (event == HookSessionStart && md.SessionID == "") {
			continue
		}
		hin.Event = event
		if event == HookSessionStart {
			hin.Source = "resume"
			if _, err := h.rt.store.Get(ctx, store.KindSession, md.SessionID); errors.Is(err, store.ErrNotFound) {
				hin.Source = "startup"
			} else if err != nil {
				return "", err
			}
		}
		o := h.a.runHooks(ctx, event, hin)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err := h.emitHookDecisions(ctx, md, HookDecisionEvent{Event: event, Decisions: o.records}); err != nil {
			return "", err
		}
		if o.denied != "" {
			return o.denied, nil
		}
		in.Content, hin.Prompt = o.prompt, o.prompt
	}
	return "", nil
}

// finish appends a completed (or handed-off) run to its session and emits
// its output; a run that handed off then emits the input of the run that
// continues it.
func (h *handlers) finish(ctx context.Context, st *runState) error {
	if h.a.hasHooks(HookStop) && st.Agent == h.a.name {
		in := h.endInput(st)
		if err := h.endHooks(ctx, st, HookStop, in); err != nil {
			return err
		}
	}
	if st.Status == RunComplete && st.Agent == h.a.name && len(h.a.opts.Memory) > 0 {
		h.remember(ctx, st)
	}
	if err := h.rt.endSessionRun(ctx, st, h.a.opts.SessionAnswersOnly); err != nil {
		return err
	}
	if st.SessionID != "" && st.Status != RunHandedOff && h.a.hasHooks(HookSessionEnd) && st.Agent == h.a.name {
		in := h.endInput(st)
		in.Event = HookSessionEnd
		if err := h.endHooks(ctx, st, HookSessionEnd, in); err != nil {
			return err
		}
	}
	if err := h.rt.emitOutput(ctx, st); err != nil {
		return err
	}
	if st.Status == RunHandedOff {
		return h.emitHandoff(ctx, st)
	}
	return nil
}

// endInput is the input of the stop hooks of the run st, which ended.
func (h *handlers) endInput(st *runState) HookInput {
	in := HookInput{Event: HookStop, Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step, Status: st.Status, Error: st.Error}
	in.Output = engine.OutputText(st.Output)
	return in
}

// endHooks runs the hooks that are told a run ended (stop, session_end)
// and publishes their decisions. A hook's failure is logged: it cannot
// change the outcome.
func (h *handlers) endHooks(ctx context.Context, st *runState, event HookEvent, in HookInput) error {
	o := h.a.runHooks(ctx, event, in)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if o.denied != "" {
		h.rt.log.Warn("agent: hook failed", "event", event, "agent", h.a.name, "run", st.RunID, "err", o.denied)
	}
	return h.emitHookDecisions(ctx, calf.Metadata{CorrelationID: st.correlationID(), RunID: st.RunID, SessionID: st.SessionID},
		HookDecisionEvent{Event: event, Decisions: o.records})
}

func (rt *Runtime) emitOutput(ctx context.Context, st *runState) error {
	spent := st.spent()
	ev := OutputEvent{Content: st.Output, Error: st.Error, Usage: spent.Usage, Cost: spent.Cost, Steps: st.Step, RunID: st.RunID, Agent: st.Agent, Chain: hops(st.Chain), Deltas: st.Deltas, Guardrail: st.Guardrail, NotServed: st.NotServed}
	switch st.Status {
	case RunComplete:
		ev.Status = OutputComplete
	case RunCancelled:
		ev.Status = OutputCancelled
	case RunHandedOff:
		ev.Status, ev.Handoff = OutputHandoff, (*Hop)(st.HandedOffTo)
	default:
		ev.Status = OutputFailed
	}
	rt.tel.Ended(ctx, st.Agent, ev.Status)
	if _, err := rt.client.Emit(ctx, OutputChannel(st.Agent), ev, calf.WithID(engine.OutputID(st.RunID)), calf.WithKey(st.RunID),
		calf.WithMetadata(calf.Metadata{CorrelationID: st.correlationID(), RunID: st.RunID, SessionID: st.SessionID})); err != nil {
		return err
	}
	r := st.ReplyTo
	if r == nil || r.Channel == "" || st.Status == RunHandedOff {
		return nil // a run that handed off answers through the run that continues it
	}
	ev.Ref = r.Ref
	corr := r.CorrelationID
	if corr == "" {
		corr = st.RunID
	}
	key := r.Key
	if key == "" {
		key = st.RunID
	}
	_, err := rt.client.Emit(ctx, r.Channel, ev, calf.WithID(engine.ReplyID(st.RunID, r.Channel, r.Key, r.CorrelationID, r.Ref)), calf.WithKey(key),
		calf.WithMetadata(calf.Metadata{CorrelationID: corr, RunID: st.RunID, SessionID: st.SessionID}))
	return err
}

// onToolCall executes one tool call and emits its result. A call whose
// result is recorded is not executed again: the recorded result is emitted.
func (h *handlers) onToolCall(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	var ev ToolCallEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	return h.toolCall(ctx, msg, id, ev)
}

// toolCall executes the call ev of run id, carried by msg, unless its
// result is recorded, the run no longer waits for it, or it waits for
// approval.
//
// One delivery of a call acts at a time in the process (see flights): a
// delivery that comes while another is in hand waits for it, then finds
// the result recorded, or kept unrecorded, which it records. The call's
// result is kept until it is recorded, and dropped once the call is
// handled.
func (h *handlers) toolCall(ctx context.Context, msg *calf.Message, id string, ev ToolCallEvent) (err error) {
	key := engine.FlightKey{Run: id, Call: ev.ToolCallID}
	if h.calls.Busy(key) && msg.Channel != approval.Channel(h.a.name) {
		// An approved call in progress, run by its answer: its own
		// message, delivered again, publishes the answer again (see
		// below) rather than wait for it.
		if a, err := approval.Get(ctx, h.rt.store, approval.ID(id, ev.ToolCallID)); err == nil && a.Status != approval.Pending {
			return approval.Publish(ctx, h.rt.client, a)
		}
	}
	fl, err := h.calls.Enter(ctx, key)
	if err != nil {
		return err
	}
	defer func() { h.calls.Leave(key, fl, err == nil) }()
	if r, found, err := h.rt.runs.ToolResult(ctx, id, ev.ToolCallID); err != nil {
		return err
	} else if found {
		return h.emitResult(ctx, id, r)
	}
	// The run's state as this process last saw it will do if it waits for
	// the call: a run waits for a call until the call is answered, which
	// the missing record says it is not, or until the run ends, a race
	// that reading the store would not close either. A state that does not
	// wait is read again from the store.
	st, _, cached, err := h.rt.runs.Latest(ctx, id)
	if err != nil {
		return err
	}
	if !cached {
		if st, _, err = h.rt.runs.Load(ctx, id); err != nil {
			return err
		}
	}
	waits := func(st *runState) bool {
		p := st.pending(ev.ToolCallID)
		return !st.Status.Terminal() && st.Step == ev.Step && st.Phase == phaseTools && p != nil && p.Name == ev.ToolName
	}
	if cached && !waits(st) {
		if st, _, err = h.rt.runs.Load(ctx, id); err != nil {
			return err
		}
	}
	if r, ok := st.resultFor(ev.Step, ev.ToolCallID); ok && r.ToolName == ev.ToolName {
		// Recorded in the run's own record (see runstore's localRuns) by
		// an earlier delivery, whose event may not have gone out.
		return h.emitResult(ctx, id, r)
	}
	p := st.pending(ev.ToolCallID)
	if !waits(st) {
		h.rt.log.Debug("agent: ignoring tool call that the run does not wait for", "agent", h.a.name, "run", id, "tool_call_id", ev.ToolCallID)
		return nil
	}
	if sub, input, ok := h.subagentCall(ev); ok {
		return h.startSubagent(ctx, msg, st, ev, sub, input)
	}
	// A call that asked for approval waits for the answer, and runs (or
	// is denied) as it says.
	var answer *approval.Approval
	if h.permissions(st) != nil || h.a.mayAsk() {
		a, err := approval.Get(ctx, h.rt.store, approval.ID(id, ev.ToolCallID))
		switch {
		case err == nil && a.Status == approval.Pending:
			return nil // its answer, a signal of the run, wakes it
		case err == nil && msg.Channel != approval.Channel(h.a.name):
			// Answered: the answer's message runs the call, on the
			// approval subscription, which takes a run's answers one at a
			// time. The call's own message, delivered again (its worker
			// died before acknowledging it), would run the tool a second
			// time beside it: it publishes the answer again instead, for
			// an answer whose message was lost (under the same message
			// ids, which streams show once).
			return approval.Publish(ctx, h.rt.client, a)
		case err == nil:
			answer = a
		case !errors.Is(err, approval.ErrNotFound):
			return err
		}
	}
	// A delivery that executed the call but failed to record the result
	// left it here: record it rather than execute the tool again.
	r, executed := h.calls.Outcome(fl)
	if !executed {
		if err := h.calls.Admit(); err != nil {
			return err
		}
		// Another process may have the call in hand: its claim says so.
		var c *engine.HeldClaim
		var done bool
		if h.claims != nil { // none on a local broker, whose flights suffice
			c, done, err = h.claims.Take(ctx, engine.ClaimToolKey(id, ev.ToolCallID), func(ctx context.Context) (bool, error) {
				_, found, err := h.rt.runs.ToolResult(ctx, id, ev.ToolCallID)
				return found, err
			})
			if err != nil {
				return err
			}
			defer c.Release(ctx)
		}
		if done {
			r, _, err := h.rt.runs.ToolResult(ctx, id, ev.ToolCallID)
			if err != nil {
				return err
			}
			return h.emitResult(ctx, id, r)
		}
		res, waiting, err := h.execute(ctx, st, ev, answer)
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: leave the call for redelivery
		}
		if err != nil {
			return err
		}
		if waiting {
			// The answer, from a person, continues the call, minutes or
			// days from now: the run's cached state would only hold room
			// that the runs in progress need (a burst of runs that all
			// ask would fill the cache with them). The answer reads the
			// run from the store.
			h.rt.runs.Forget(id)
			return nil
		}
		data, err := json.Marshal(res)
		if err != nil {
			res = errorResult(ev.Step, *p, fmt.Errorf("tool result does not encode as JSON: %v", err))
			data, _ = json.Marshal(res)
		}
		if limit := h.rt.client.MaxMessageSize(); len(data) > limit {
			res = errorResult(ev.Step, *p, fmt.Errorf("tool result of %d bytes exceeds the message size limit of %d bytes", len(data), limit))
			data, _ = json.Marshal(res)
		}
		r = unsavedResult{ev: res, data: data}
		h.calls.Keep(fl, r)
	}
	// The tool ran: its result is recorded through an outage of the store
	// rather than left to a redelivery, which may go to another process.
	recorded, err := engine.RetryOutage(ctx, func() (ToolResultEvent, error) {
		return h.rt.runs.RecordToolResult(ctx, id, r.ev, r.data, h)
	})
	if err != nil {
		return err
	}
	return h.emitResult(ctx, id, recorded)
}

// resultFor returns the result s holds for the call id of step: a pending
// call's, or one in the tool calls the run has kept in memory.
func (s *runState) resultFor(step int, id string) (ToolResultEvent, bool) {
	if s.Step == step {
		if p := s.pending(id); p != nil && p.Result != nil {
			return ToolResultEvent{Step: step, ToolCallID: p.ID, ToolName: p.Name, Status: p.Status, Result: p.Result, Handoff: p.Handoff, Hooks: p.Hooks}, true
		}
	}
	for i := len(s.ToolCalls) - 1; i >= 0; i-- {
		c := &s.ToolCalls[i]
		if c.Step < step {
			break
		}
		if c.Step == step && c.ID == id {
			return ToolResultEvent{Step: step, ToolCallID: c.ID, ToolName: c.Name, Status: c.Status, Result: c.Result, Handoff: c.Handoff, Hooks: c.Hooks}, true
		}
	}
	return ToolResultEvent{}, false
}

// execute runs the tool with its timeout. Every failure (bad arguments, an
// error, a panic, a timeout) becomes an error result for the model. At the
// timeout the run goes on, even when the tool ignores its context: the
// call is left to finish on its own, and what it returns then is dropped
// (counted by the runtime and logged), never recorded.
func (h *handlers) execute(ctx context.Context, st *runState, ev ToolCallEvent, approved *approval.Approval) (res ToolResultEvent, waiting bool, err error) {
	t, _, ok := h.a.lookup(ctx, ev.ToolName)
	perms := h.permissions(st)
	if !ok || (len(h.a.opts.Hooks) == 0 && perms == nil) || !json.Valid([]byte(ev.Arguments)) {
		// Arguments that are not JSON go to the tool, which reports them.
		return h.callTool(ctx, st, ev), false, nil
	}
	in := HookInput{
		Event: HookPreToolUse, Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: ev.Step,
		ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, ToolKind: tool.KindOf(t), Arguments: json.RawMessage(ev.Arguments),
	}
	p := pendingCall{ID: ev.ToolCallID, Name: ev.ToolName}
	var records []HookRecord
	// refused is the result of a call that does not run: the model gets
	// err, and the record what the hooks decided.
	refused := func(err error) (ToolResultEvent, bool, error) {
		res := errorResult(ev.Step, p, err)
		res.Hooks = records
		return res, false, nil
	}
	if approved == nil {
		pre := h.a.runHooks(ctx, HookPreToolUse, in)
		records = pre.records
		if ctx.Err() != nil {
			return ToolResultEvent{}, false, ctx.Err()
		}
		if err := h.emitHookDecisions(ctx, st.metadata(), HookDecisionEvent{Event: HookPreToolUse, Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Decisions: records}); err != nil {
			return ToolResultEvent{}, false, err
		}
		if pre.denied != "" {
			return refused(errors.New(pre.denied))
		}
		ev.Arguments = string(pre.args)
		// A hook that asked sends the call to approval whatever the
		// permissions say, unless they refuse it.
		ask := pre.ask
		if perms != nil {
			switch d, why := perms.decide(ev.ToolName, in.ToolKind); d {
			case decideDeny:
				return refused(fmt.Errorf("the call was refused: %s", why))
			case decideAsk:
				if ask == "" {
					allowed, err := h.rt.sessionAllows(ctx, st.SessionID, ev.ToolName)
					if err != nil {
						return ToolResultEvent{}, false, err
					}
					if !allowed {
						ask = why
					}
				}
			}
		}
		if ask != "" {
			return ToolResultEvent{}, true, h.requestApproval(ctx, st, ev, in.ToolKind, ask, records)
		}
	} else {
		records = hookRecords(approved)
		if approved.Status != approval.Approved {
			return refused(fmt.Errorf("the call was denied by the person asked to approve it: %s", cmp.Or(approved.Message, "no reason given")))
		}
		if approved.ForSession && st.SessionID != "" {
			// Approved for the session too: its later calls of the tool
			// run without asking. Recorded before the call runs, and again
			// (to no effect) should the call be delivered again.
			if err := h.rt.setSessionTool(ctx, st.SessionID, ev.ToolName, true); err != nil {
				return ToolResultEvent{}, false, err
			}
		}
		ev.Arguments = string(approved.Arguments)
		if len(approved.ApprovedArguments) > 0 {
			ev.Arguments = string(approved.ApprovedArguments)
		}
	}
	res = h.callTool(ctx, st, ev)
	if ctx.Err() != nil {
		return res, false, nil // shutting down: the call goes back for redelivery
	}
	in.Event, in.Arguments, in.Result = HookPostToolUse, json.RawMessage(ev.Arguments), res.Result
	post := h.a.runHooks(ctx, HookPostToolUse, in)
	if ctx.Err() != nil {
		return res, false, nil // shutting down: the call goes back for redelivery
	}
	if err := h.emitHookDecisions(ctx, st.metadata(), HookDecisionEvent{Event: HookPostToolUse, Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Decisions: post.records}); err != nil {
		// The tool ran: it must not run again for want of this event. The
		// decisions are recorded with the result all the same.
		h.rt.log.Warn("agent: hook decisions not published", "agent", h.a.name, "run", st.RunID, "call", ev.ToolCallID, "err", err)
	}
	switch {
	case post.denied != "":
		res = errorResult(ev.Step, p, errors.New(post.denied))
	case post.result != res.Result:
		res.Result, res.Status = post.result, StatusSuccess
		if post.result.IsError {
			res.Status = StatusError
		}
	}
	res.Hooks = append(records, post.records...)
	return res, false, nil
}

// requestApproval records the approval request of ev, unless a delivery
// before this one did, and publishes it.
func (h *handlers) requestApproval(ctx context.Context, st *runState, ev ToolCallEvent, kind tool.Kind, why string, records []HookRecord) error {
	a := newApproval(h.a.name, st, ev, kind, why, records)
	a.RequestedAt = h.rt.now()
	if p := h.permissions(st); p != nil && p.ApprovalTimeout > 0 {
		a.ExpiresAt = a.RequestedAt.Add(p.ApprovalTimeout)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return calf.Permanent(err)
	}
	if _, err := h.rt.store.Put(ctx, approval.Kind, a.ID, data, 0); errors.Is(err, store.ErrConflict) {
		if a, err = approval.Get(ctx, h.rt.store, a.ID); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if a.Status == approval.Pending {
		if err := h.rt.startExpiry(ctx, a); err != nil {
			return err
		}
		if err := h.rt.awaitAnswer(ctx, a); err != nil {
			return err
		}
	}
	return approval.Publish(ctx, h.rt.client, a)
}

// onApproval carries out an answered approval request: the call runs with
// the approved arguments, or the model is told it was denied.
func (h *handlers) onApproval(ctx context.Context, msg *calf.Message) error {
	var a approval.Approval
	if err := msg.Decode(&a); err != nil {
		return calf.Permanent(err)
	}
	if a.Status == approval.Pending || a.Agent != h.a.name {
		return nil // a request: the answer is what acts
	}
	var err error
	if h.a.step != nil {
		// A custom agent's step asked: it runs again, and finds the answer.
		err = h.infer(ctx, &inference{msg: msg, ev: inferenceEvent{Step: a.Step}}, a.RunID)
	} else {
		err = h.toolCall(ctx, msg, a.RunID, ToolCallEvent{Step: a.Step, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Arguments: string(a.Arguments)})
	}
	if err != nil {
		return err
	}
	// Carried out: the request's wait for its answer is over.
	return signals.Answered(ctx, h.rt.signalEnv(), agentSignalKey(a.Agent, a.RunID), signals.ApprovalName(a.ToolCallID))
}

// callTool runs the tool of ev with its timeout.
func (h *handlers) callTool(ctx context.Context, st *runState, ev ToolCallEvent) (res ToolResultEvent) {
	if h.rt.tel != nil {
		msg, _ := calf.MessageFromContext(ctx)
		var span trace.Span
		ctx, span = h.rt.tel.Tool(ctx, msg, h.a.name, ev.ToolName, ev.ToolCallID)
		began := time.Now()
		defer func() {
			var failure, detail string
			if res.Status != StatusSuccess {
				failure, detail = res.Status, res.Status
				if res.Result != nil {
					detail = res.Result.Text()
				}
			}
			h.rt.tel.EndTool(ctx, span, ev.ToolName, failure, detail, time.Since(began))
		}()
	}
	p := pendingCall{ID: ev.ToolCallID, Name: ev.ToolName}
	t, _, ok := h.a.lookup(ctx, ev.ToolName)
	if !ok {
		return errorResult(ev.Step, p, fmt.Errorf("%w %q", tool.ErrUnknownTool, ev.ToolName))
	}
	timeout := h.within(st, h.a.opts.ToolTimeout)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rc := RunContext{deps: h.deps(st), Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: ev.Step, ToolCallID: ev.ToolCallID, rt: h.rt, seq: newSeq()}
	tctx = context.WithValue(tctx, runContextKey{}, rc)
	handoff := &handoffSlot{}
	tctx = context.WithValue(tctx, handoffKey{}, handoff)
	start := time.Now()
	r, late := h.rt.tools.Call(tctx, engine.ToolCall{Tool: t, Arguments: json.RawMessage(ev.Arguments), Agent: h.a.name, Name: ev.ToolName, Log: h.rt.log})
	if late != nil {
		h.rt.tel.OverdueTools(h.a.name, ev.ToolName, 1)
		go h.dropLate(late, st.RunID, ev, start)
	}
	switch {
	case r.Err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		return errorResult(ev.Step, p, fmt.Errorf("tool %q timed out after %s", ev.ToolName, timeout))
	case r.Err != nil:
		return errorResult(ev.Step, p, r.Err)
	case r.Out == nil:
		r.Out = &tool.Result{}
	}
	h.rt.log.Debug("agent: tool done", "agent", h.a.name, "tool", ev.ToolName, "run", st.RunID, "elapsed", time.Since(start))
	if r.Out.IsError {
		return ToolResultEvent{Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Status: StatusError, Result: r.Out}
	}
	return ToolResultEvent{Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Status: StatusSuccess, Result: r.Out, Handoff: handoff.get()}
}

// dropLate waits for a tool call that outlived its timeout and drops what
// it returns. The call counts in the calf.tool.overdue metric until then.
func (h *handlers) dropLate(late <-chan engine.ToolReturn, run string, ev ToolCallEvent, start time.Time) {
	r := <-late
	h.rt.tel.OverdueTools(h.a.name, ev.ToolName, -1)
	h.rt.late.Add(1)
	h.rt.log.Warn("agent: tool returned after its timeout; its result is dropped",
		"agent", h.a.name, "tool", ev.ToolName, "run", run, "tool_call_id", ev.ToolCallID,
		"elapsed", time.Since(start), "err", r.Err)
}

// onToolResult records a tool result. The result that completes the step
// advances the run and emits exactly one inference for the next step.
// Results for calls the run does not wait for, or already has, are ignored.
func (h *handlers) onToolResult(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	var ev ToolResultEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	if ev.Result == nil {
		ev.Result = &tool.Result{}
	}
	// The tool's handler may have recorded the result in the run itself
	// (runstore's localRuns): the copy this process keeps then shows it
	// answered, and nothing is left to write.
	st, cached, err := h.rt.runs.Answered(ctx, id, ev)
	if err != nil {
		return err
	}
	if !cached {
		if st, err = h.rt.runs.Update(ctx, id, h.applyResult(ev)); err != nil {
			return err
		}
	}
	if st.Status.Terminal() && st.Step == ev.Step && st.AdvancedBy == ev.ToolCallID {
		return h.finish(ctx, st) // handed off, or refused a handoff over the limit
	}
	if st.Status == RunRunning && st.Phase == phaseInference && st.Step == ev.Step+1 && st.AdvancedBy == ev.ToolCallID {
		return h.emit(ctx, inferenceChannel(h.a.name), inferenceEvent{Step: st.Step}, engine.InferenceID(id, st.Step), id)
	}
	return nil
}

// applyResult returns the update that records the result ev in a run
// that waits for it, and advances the run (or hands it off) when it was
// the last result of its step. Results for calls the run does not wait
// for, or already has, change nothing.
func (h *handlers) applyResult(ev ToolResultEvent) runstore.UpdateFunc[*runState] {
	return func(st *runState) (bool, error) { return h.TakeResult(st, ev) }
}

// TakeResult is applyResult's update, with which the run store may record
// a result in the run's own record (see runstore.Taker).
func (h *handlers) TakeResult(st *runState, ev ToolResultEvent) (bool, error) {
	if st.Status.Terminal() || st.Step != ev.Step || st.Phase != phaseTools {
		return false, nil
	}
	p := st.pending(ev.ToolCallID)
	if p == nil || p.Result != nil {
		return false, nil // unknown, or already answered
	}
	p.Result, p.Status, p.Handoff, p.Hooks = ev.Result, ev.Status, ev.Handoff, ev.Hooks
	if s := ev.Spent; s != nil {
		st.Usage, st.Cost = st.Usage.Add(s.Usage), st.Cost.Add(s.Cost)
	}
	if st.allAnswered() && !h.handOff(st, ev.ToolCallID) {
		h.advance(st, ev.ToolCallID)
	}
	return true, nil
}

// advance moves a run whose tool calls are all answered to its next step.
func (h *handlers) advance(st *runState, by string) {
	for _, p := range st.Pending {
		st.Messages = append(st.Messages, engine.ToolMessage(p.ID, p.Name, p.Status == StatusError, p.Result))
		st.ToolCalls = append(st.ToolCalls, ToolCallRecord{Step: st.Step, ID: p.ID, Name: p.Name, Arguments: p.Arguments, Status: p.Status, Result: p.Result, Handoff: p.Handoff, Hooks: p.Hooks})
	}
	st.Pending = nil
	st.Step++
	st.Deltas = 0
	st.Phase = phaseInference
	st.AdvancedBy = by
}

// permissions returns the permissions of the run: its own, or the agent's.
func (h *handlers) permissions(st *runState) *Permissions {
	if st.Permissions != nil {
		return st.Permissions
	}
	return h.a.opts.Permissions
}

// inputPrompt returns the prompt of an agent's input message.
func inputPrompt(m *calf.Message) string {
	var in struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(m.Data, &in); err != nil {
		return "" // the input handler says what is wrong with it
	}
	return in.Content
}
