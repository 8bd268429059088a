package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// RunOptions configures one run. A nil *RunOptions means the defaults.
type RunOptions struct {
	// Deps are dependencies that travel with the run, as JSON, to whichever
	// worker handles it: a value made by [Deps.Value], which tools read
	// with [Deps.Of]. A worker that gives LocalDeps at Serve uses those
	// instead. Left unset (or the zero value of their type), nothing
	// travels: the workers' LocalDeps serve, or the zero value. Deps that
	// do not encode as JSON (funcs, channels, handles) must be left unset
	// and given as LocalDeps.
	Deps DepsValue
	// SessionID continues a conversation: the run sees the session's
	// history, and a completed run's messages are appended to it.
	SessionID string
	// Thread, when set, is the conversation the run continues, in place of
	// a session: the application keeps the conversation itself, passes it
	// to each run, and gets it back, with the run's messages, in
	// [Output.Thread]. The prompt, when not empty, is added as a user
	// message; when empty, the run answers the thread as it is (its last
	// message from the user, or tool results). Stateless: nothing of the
	// conversation is kept once the run's state is deleted. Exclusive with
	// SessionID.
	Thread []model.Message
	// RunID names the run. Default: a fresh id. Submitting the same run id
	// again does not start a second run: once the first has ended, the
	// caller gets its output.
	RunID string
	// Parts are further content of the user's message, such as images.
	Parts []model.Part
	// ReplyTo, for [Agent.Submit], names where the run's output goes when
	// it ends. Run and RunStream set their own.
	ReplyTo *ReplyTo
	// Stream, for [Agent.Submit], has the run publish the model's text and
	// tool-call deltas on the agent's stream channel as it goes, as
	// RunStream's runs do, for observers that follow the run's events (an
	// event log). Run does not stream; RunStream always does.
	Stream bool
	// Parent is the id of the run that starts this one, if any; it is
	// recorded in the run's state.
	Parent string
	// Deadline, when set, ends the run with an error at the first step
	// that starts after it, and bounds its model and tool calls
	// ([InputEvent.Deadline]); a team sets it on its members' runs.
	// Default: none, the run bounded by its steps and the caller's wait.
	Deadline time.Time
	// WaitForWorkers has Run and RunStream wait for a process that serves
	// the agent, however long it takes to start (up to the run's
	// timeout), instead of failing with [ErrNotServed] when none serves it
	// (see [Options.StartTimeout]). Submit never checks: its run waits in
	// the broker for a worker, even one that has never served the agent
	// yet (the caller prepares the group of the agent's input channel;
	// see [calf.GroupPreparer]).
	WaitForWorkers bool
	// Budget, when set, bounds what the run spends, in place of the
	// agent's [Options.Budget]; see [Budget].
	Budget *Budget
	// Permissions, when set, replace the agent's [Options.Permissions] for
	// this run; they travel with the run to the workers. The agent must
	// have permissions of its own (any, even bypass): only then do its
	// workers carry out approval answers.
	Permissions *Permissions
}

// Output is the result of a completed run. It is the caller's to change:
// its messages and tool calls share no memory with the run's state, which
// the runtime may keep.
type Output[Out any] struct {
	// Output is the agent's typed output.
	Output Out
	// Agent is the agent that produced the output: the agent run, or after
	// handoffs the last agent of the chain.
	Agent string
	// RunID is the id of the run that produced the output: after
	// handoffs, the last run of the chain.
	RunID     string
	SessionID string
	// Chain lists the runs that handed off, one to the next, before the
	// run that produced the output, oldest first; it is empty when the run
	// did not hand off.
	Chain []Hop
	// Messages are the messages the run added to the conversation: the
	// user's input, the assistant's responses and the tool results.
	Messages []model.Message
	// Cost is what the run's model calls cost, with those of the runs it
	// started (subagents) and, after handoffs, of the runs before it in
	// the chain; Usage counts the same calls.
	Cost model.Cost
	// Thread is the whole conversation after the run: the session's
	// history (or [RunOptions.Thread]) it started from, then Messages.
	// Passed as the next run's RunOptions.Thread, it continues the
	// conversation as a session would. After handoffs, it is the
	// conversation as the last agent of the chain saw it.
	Thread []model.Message
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
	// ErrRunParked is matched by the error of Run and RunStream when a
	// handler of the agent parked a message of the run on
	// [calf.DeadLetterChannel] after its last attempt: the run cannot go
	// on by itself. It has not ended: replaying the dead letter, once its
	// cause is fixed ([deadletter.Replay], or calf deadletters replay),
	// continues it, and [Agent.Wait] then gives its output.
	ErrRunParked = errors.New("agent: run held up by a parked message")
	// ErrNotServed is matched by the error of Run and RunStream when no
	// process serves the agent: nothing consumes its input channel (see
	// [Options.StartTimeout]). The run is cancelled, so that a worker that
	// starts later does not carry it out for nobody.
	ErrNotServed = errors.New("agent: no process serves the agent")
)

// RunRef names a run: the kind of runner it is a run of ("agent",
// "team" or "workflow"), the runner's name and the run's id. The runtime's
// controls of an agent's runs known by name ([Runtime.Cancel],
// [Runtime.Pause], [Runtime.Resume], [Runtime.SetBudget],
// [Runtime.Submit]) take one whose Kind is "agent" or empty.
type RunRef struct {
	// Kind is "agent", "team" or "workflow"; empty means "agent".
	Kind string
	// Name is the agent's, the team's or the workflow's name.
	Name string
	// RunID is the run's id.
	RunID string
}

// kind returns r's kind, "agent" when empty.
func (r RunRef) kind() string {
	if r.Kind == "" {
		return "agent"
	}
	return r.Kind
}

// agentRef checks that r names a run of an agent, for the runtime's
// controls of agent runs.
func (r RunRef) agentRef(verb string) error {
	switch {
	case r.kind() != "agent":
		return fmt.Errorf("agent: %s: run %s of %s %s is not an agent's run", verb, r.RunID, r.Kind, r.Name)
	case r.Name == "" || r.RunID == "":
		return fmt.Errorf("agent: %s: the run needs an agent name and a run id (RunRef{Name: %q, RunID: %q})", verb, r.Name, r.RunID)
	}
	return nil
}

// RunError reports a run that ended without output: the run of an agent,
// a team or a workflow, which RunRef names (Kind says which). It is the
// one error type of a failed, cancelled or held-up run for the three kinds
// of runners, and matches with errors.Is [ErrRunFailed] or
// [ErrRunCancelled] by its Status, [ErrRunParked] when Parked is set,
// [ErrGuardrailTripped] when Guardrail is, and what its Err matches.
type RunError struct {
	RunRef
	// Status is the run's status: failed, cancelled, or running for a run
	// held up by a parked message.
	Status RunStatus
	// Reason says why, as recorded in the run's state.
	Reason string
	// Err is the cause, when there is one to match: the caller's context
	// error for a run cancelled because its caller stopped waiting,
	// [ErrNotServed], or a runner's own sentinel (a workflow's
	// workflow.ErrLimit, a team's team.ErrUnknownMember).
	Err error
	// Parked is the dead letter of the message that holds up the run,
	// for an error matching ErrRunParked.
	Parked *calf.DeadLetter
	// Guardrail is the guardrail that ended the run, for an error matching
	// ErrGuardrailTripped.
	Guardrail *GuardrailTrip
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%s %s: run %s %s: %s", e.kind(), e.Name, e.RunID, e.Status, e.Reason)
}

// Is matches ErrRunFailed, ErrRunCancelled, ErrRunParked or
// ErrGuardrailTripped.
func (e *RunError) Is(target error) bool {
	return (target == ErrRunFailed && e.Status == RunFailed) || (target == ErrRunCancelled && e.Status == RunCancelled) ||
		(target == ErrRunParked && e.Parked != nil) || (target == ErrGuardrailTripped && e.Guardrail != nil)
}

// ParkedError returns the error that a caller waiting on run (of an
// agent, a team or a workflow) reports when msg, a message of
// [calf.DeadLetterChannel] that belongs to the run or to a run it started,
// holds it up: a *RunError matching [ErrRunParked], with Parked set. A
// dead letter parked by another kind of subscriber (one outside Calf's
// agent, team and workflow handlers) holds nothing up: ParkedError returns
// nil for it, and for a message that is not a dead letter.
func ParkedError(msg *calf.Message, run RunRef) error {
	var dl calf.DeadLetter
	if err := msg.Decode(&dl); err != nil || dl.Message == nil || !heldUp(dl.Group) {
		return nil
	}
	parked := dl.Message.Metadata.RunID
	if parked == "" {
		parked = run.RunID
	}
	run.Kind = run.kind()
	return &RunError{
		RunRef: run, Status: RunRunning, Parked: &dl,
		Reason: fmt.Sprintf("message %s of run %s on %s was parked after %d attempts (%s); replaying dead letter %s continues the run",
			dl.Message.ID, parked, dl.Message.Channel, dl.Attempts, dl.Error, msg.ID),
	}
}

// heldUp reports whether a message that group parked holds its run up: the
// group is one of the handlers of an agent, a team or a workflow.
func heldUp(group string) bool {
	for _, p := range []string{channelPrefix, "calf.team.", "calf.workflow."} {
		if strings.HasPrefix(group, p) {
			return true
		}
	}
	return false
}

// Unwrap returns the error's cause, Err.
func (e *RunError) Unwrap() error { return e.Err }

// runError returns the *RunError of the run id of a that ended with
// status for reason.
func (a *Agent[Out]) runError(id string, status RunStatus, reason string) *RunError {
	return &RunError{RunRef: RunRef{Kind: "agent", Name: a.name, RunID: id}, Status: status, Reason: reason}
}

// agentRunError is runError for an agent known by name.
func agentRunError(name, id string, status RunStatus, reason string) *RunError {
	return &RunError{RunRef: RunRef{Kind: "agent", Name: name, RunID: id}, Status: status, Reason: reason}
}

// Run starts a run with prompt as the user's message and waits for its
// output. The run is carried out by the handlers of whichever processes
// serve the agent on rt's broker, this one included if it called Serve
// or if rt serves on demand ([RuntimeOptions.ServeOnDemand]: Run then
// serves the agent first, once per runtime).
// When ctx ends or the agent's Timeout passes first, the run is cancelled
// and Run returns a *RunError matching ErrRunCancelled and ctx's error.
// When a message of the run is parked on the dead-letter channel, Run
// returns at once a *RunError matching ErrRunParked, and the run stays as
// it is, to be continued by replaying the dead letter.
func (a *Agent[Out]) Run(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions) (out *Output[Out], err error) {
	rt, err = a.onDemand(ctx, rt)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, a.opts.Timeout, fmt.Errorf("agent %s: run timed out after %s: %w", a.name, a.opts.Timeout, context.DeadlineExceeded))
	defer cancel()
	// The output comes back on this client's inbox: callers in other
	// processes do not receive it.
	msg, _, err := a.input(ctx, rt, prompt, opts, false, rt.client.Inbox())
	if err != nil {
		return nil, err
	}
	if _, span := rt.tel.Invoke(ctx, a.name, msg); span != nil {
		defer func() {
			var ended *telemetry.Ended
			if out != nil {
				ended = &telemetry.Ended{Usage: out.Usage}
			}
			telemetry.EndInvoke(span, ended, err)
		}()
	}
	id := msg.Metadata.RunID
	f, err := rt.client.Follow(ctx, rt.client.Inbox(), id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The dead letters of the run, and of the runs it starts (subagents).
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		return nil, err
	}
	if err := a.waitForWorkers(ctx, rt, id, opts); err != nil {
		return nil, err
	}
	if err := rt.publishInput(ctx, msg); err != nil {
		return nil, fmt.Errorf("agent %s: start run: %w", a.name, err)
	}
	start := a.startCheck(rt, id, opts)
	var m *calf.Message
	for m == nil {
		if m, err = start.next(ctx, f); err != nil {
			if errors.Is(err, ErrNotServed) {
				return nil, a.notServed(ctx, rt, id, err)
			}
			return nil, a.abandon(ctx, rt, id)
		}
		if m.Channel == calf.DeadLetterChannel {
			if err := ParkedError(m, RunRef{Kind: "agent", Name: a.name, RunID: id}); err != nil {
				return nil, err
			}
			m = nil
		}
	}
	var ev OutputEvent
	if err := m.Decode(&ev); err != nil {
		return nil, err
	}
	return a.result(ctx, rt, id, &ev)
}

// stored returns the output of a finished run, read from the store: a
// *RunError for a run that failed or was cancelled, an error for a run
// still in progress, and an error matching store.ErrNotFound for an
// unknown run. For a run that handed off, it is the output of its handoff
// chain: the last run's output and id, with the messages, tool calls,
// usage and steps of every run of the chain.
func (a *Agent[Out]) stored(ctx context.Context, rt *Runtime, runID string) (*Output[Out], error) {
	st, err := untilAvailable(ctx, func() (*runState, error) { return rt.lastOfChain(ctx, runID) })
	if err != nil {
		return nil, err
	}
	if !st.Status.Terminal() {
		return nil, fmt.Errorf("agent %s: run %s is still %s", a.name, runID, st.Status)
	}
	if st, err = rt.withChain(ctx, st); err != nil {
		return nil, err
	}
	return a.outputOf(st)
}

// endedRun returns the state of the run id, which ended: the state this
// process cached when it shows the run ended (what an ended run's state
// says does not change, but for where its output is sent), or else the
// stored one.
func (rt *Runtime) endedRun(ctx context.Context, id string) (*runState, error) {
	st, _, ok, err := rt.runs.Latest(ctx, id)
	if err != nil || (ok && st.Status.Terminal()) {
		return st, err
	}
	return rt.loadRun(ctx, id)
}

// result returns the output of the run id, answered by ev: the output of
// that run or, after handoffs, of the last run of its chain.
func (a *Agent[Out]) result(ctx context.Context, rt *Runtime, id string, ev *OutputEvent) (*Output[Out], error) {
	name := a.name
	if ev.RunID != "" && ev.RunID != id {
		id, name = ev.RunID, ev.Agent
	}
	if ev.Status != OutputComplete {
		status := RunFailed
		if ev.Status == OutputCancelled {
			status = RunCancelled
		}
		re := agentRunError(name, id, status, ev.Error)
		re.Guardrail = ev.Guardrail
		if ev.NotServed {
			re.Err = ErrNotServed
		}
		return nil, re
	}
	// The run has ended: read it through an outage of the store rather
	// than report the outage for a run that completed.
	st, err := untilAvailable(ctx, func() (*runState, error) {
		st, err := rt.endedRun(ctx, id)
		if err == nil {
			st, err = rt.withChain(ctx, st)
		}
		return st, err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent %s: run %s ended (%s), but this process's store has no record of it: "+
			"the processes that serve the agent use another store than this caller: %w", name, id, ev.Status, err)
	}
	if err != nil {
		return nil, err
	}
	return a.outputOf(st)
}

func (a *Agent[Out]) outputOf(st *runState) (*Output[Out], error) {
	if st.Status != RunComplete {
		re := agentRunError(st.Agent, st.RunID, st.Status, st.Error)
		re.Guardrail = st.Guardrail
		if st.NotServed {
			re.Err = ErrNotServed
		}
		return nil, re
	}
	// The output is the caller's to change: it shares nothing with the
	// state, which the runtime's caches may hold.
	thread := model.CloneMessages(st.Messages)
	var added []model.Message // the run's own messages: the end of its thread
	if n := len(st.NewMessages()); n > 0 {
		added = thread[len(thread)-n:]
	}
	o := &Output[Out]{
		Agent: st.Agent, RunID: st.RunID, SessionID: st.SessionID, Chain: slices.Clone(st.Chain),
		Messages: added, Thread: thread, ToolCalls: cloneToolCalls(st.ToolCalls),
		Usage: st.spent().Usage, Cost: st.spent().Cost, Steps: st.Step, Duration: st.EndedAt.Sub(st.StartedAt),
	}
	if err := json.Unmarshal(st.Output, &o.Output); err != nil {
		if st.Agent != a.name {
			return nil, fmt.Errorf("agent %s: run %s: the output of agent %s, which the run handed off to, does not decode as %s: %w",
				a.name, st.RunID, st.Agent, reflect.TypeFor[Out](), err)
		}
		return nil, fmt.Errorf("agent %s: run %s: decode output: %w", a.name, st.RunID, err)
	}
	return o, nil
}

// cloneToolCalls returns a copy of rs that shares nothing that could
// change with it.
func cloneToolCalls(rs []ToolCallRecord) []ToolCallRecord {
	if rs == nil {
		return nil
	}
	c := make([]ToolCallRecord, len(rs))
	for i, r := range rs {
		r.Result = r.Result.Clone()
		if r.Handoff != nil {
			h := *r.Handoff
			r.Handoff = &h
		}
		if r.Hooks != nil {
			r.Hooks = slices.Clone(r.Hooks)
			for j := range r.Hooks {
				r.Hooks[j].Arguments = bytes.Clone(r.Hooks[j].Arguments)
			}
		}
		c[i] = r
	}
	return c
}

// input builds the input message of a new run.
// inbox, when set, is the caller's inbox, where the output is to go.
func (a *Agent[Out]) input(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions, stream bool, inbox string) (*calf.Message, InputEvent, error) {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	id := o.RunID
	if id == "" {
		id = rt.newID()
	}
	in := InputEvent{Content: prompt, Parts: o.Parts, Stream: stream, ReplyTo: o.ReplyTo, Parent: o.Parent, Messages: o.Thread, Deadline: o.Deadline}
	if b := o.Budget; b != nil {
		if err := b.validate(); err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Budget: %w", a.name, err)
		}
		in.Budget = b
	}
	if o.Thread != nil && o.SessionID != "" {
		return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Thread and SessionID both name the conversation to continue: give one", a.name)
	}
	if o.Permissions != nil {
		if a.opts.Permissions == nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Permissions needs an agent with permissions of its own (Options.Permissions), whose workers carry out approvals", a.name)
		}
		if err := o.Permissions.validate(); err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Permissions: %w", a.name, err)
		}
		in.Permissions = o.Permissions
	}
	if inbox != "" {
		in.ReplyTo = &ReplyTo{Channel: inbox, Key: id}
	}
	// Deps travel only when the caller gave some: a run without them
	// carries none, and a worker's LocalDeps (or the zero value) serve.
	if !o.Deps.isZero() {
		d, err := json.Marshal(o.Deps.v)
		if err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Deps of type %T cannot travel with the run, which carries them as JSON: %v; "+
				"leave RunOptions.Deps unset and give the dependencies to each process that serves the agent as ServeOptions.LocalDeps", a.name, o.Deps.v, err)
		}
		in.Deps = d
	}
	msg, err := rt.client.NewMessage(ctx, InputChannel(a.name), in, calf.WithID(inputID(id)), calf.WithKey(id),
		calf.WithMetadata(calf.Metadata{CorrelationID: id, RunID: id}))
	if err != nil {
		return nil, InputEvent{}, err
	}
	msg.Metadata.SessionID = o.SessionID
	return msg, in, nil
}

// Submit starts a run without waiting for it and returns its id. The run
// is carried out by whichever processes serve the agent; its output goes
// to the agent's output channel and, when opts.ReplyTo is set, to the
// reply channel, where a handler (of a parent agent, a team, a workflow)
// picks it up. Called from inside a handler, the input records the
// handled message as its cause. Submitting a run id again starts nothing
// new: a run that has ended answers again with its output.
func (a *Agent[Out]) Submit(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions) (string, error) {
	rt, err := a.onDemand(ctx, rt)
	if err != nil {
		return "", err
	}
	msg, in, err := a.input(ctx, rt, prompt, opts, opts != nil && opts.Stream, "")
	if err != nil {
		return "", err
	}
	if opts != nil && opts.Parent != "" {
		// A child run (a team member's, a workflow node's): what waits on
		// it learns at once when no process serves the agent.
		if refused, err := rt.refuseUnserved(ctx, a.name, msg, &in); err != nil {
			return "", fmt.Errorf("agent %s: submit run: %w", a.name, err)
		} else if refused {
			return msg.Metadata.RunID, nil
		}
	}
	// The span of a submitted run is its start: the caller does not wait.
	_, span := rt.tel.Invoke(ctx, a.name, msg)
	err = rt.publishInput(ctx, msg)
	telemetry.EndInvoke(span, nil, err)
	if err != nil {
		return "", fmt.Errorf("agent %s: submit run: %w", a.name, err)
	}
	return msg.Metadata.RunID, nil
}

// SubmitRequest asks [Runtime.Submit] for a run of an agent known by
// name.
type SubmitRequest struct {
	// Run names the agent and the run's id, both required.
	Run RunRef
	// SessionID is the run's session, or none when empty, whatever the
	// message being handled (when called from a handler) has.
	SessionID string
	// Input is the run's input event. Its Deps must be what that agent's
	// Deps encode to.
	Input *InputEvent
}

// Submit starts the run req asks for, of an agent that any process on
// the runtime's broker may serve, without waiting for it: it publishes
// the run's input event (id "{run}.input", key the run id). It is the
// untyped form of [Agent.Submit], for callers that know an agent by name
// only.
func (rt *Runtime) Submit(ctx context.Context, req *SubmitRequest) error {
	if rt == nil {
		return ErrNoRuntime
	}
	if req == nil || req.Input == nil {
		return errors.New("agent: submit needs an input")
	}
	if err := req.Run.agentRef("submit"); err != nil {
		return err
	}
	agentName, runID := req.Run.Name, req.Run.RunID
	if err := calf.ValidateChannel(InputChannel(agentName)); err != nil {
		return fmt.Errorf("agent: submit to %q: %w", agentName, err)
	}
	if err := rt.prepareInput(ctx, InputChannel(agentName)); err != nil {
		return fmt.Errorf("agent %s: submit run %s: %w", agentName, runID, err)
	}
	_, err := rt.client.Emit(ctx, InputChannel(agentName), req.Input, calf.WithID(inputID(runID)), calf.WithKey(runID),
		calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID}),
		// The run's session is the request's, even when empty: a run
		// started from a handler must not join the handled run's session.
		func(m *calf.Message) { m.Metadata.SessionID = req.SessionID })
	if err != nil {
		return fmt.Errorf("agent %s: submit run %s: %w", agentName, runID, err)
	}
	return nil
}

// DecodeOutput returns the typed output of an [OutputEvent], such as a
// reply to [Agent.Submit]. A run that did not complete gives a *RunError.
func (a *Agent[Out]) DecodeOutput(ev *OutputEvent) (Out, error) {
	var out Out
	if ev.Status != OutputComplete {
		st := RunFailed
		if ev.Status == OutputCancelled {
			st = RunCancelled
		}
		re := a.runError(ev.RunID, st, ev.Error)
		re.Guardrail = ev.Guardrail
		if ev.NotServed {
			re.Err = ErrNotServed
		}
		return out, re
	}
	if err := json.Unmarshal(ev.Content, &out); err != nil {
		return out, fmt.Errorf("agent %s: run %s: decode output: %w", a.name, ev.RunID, err)
	}
	return out, nil
}

// startCheck is the check, made once StartTimeout has passed without a
// sign of the run, that some process serves the agent.
type startCheck struct {
	due   time.Time // zero once the check is made or not wanted
	seen  bool      // a sign of the run came
	input string    // the run's input channel, whose message is no sign
	// check reports ErrNotServed, or nil when the run has started or a
	// process may yet take it.
	check func(ctx context.Context) error
}

func (a *Agent[Out]) startCheck(rt *Runtime, id string, opts *RunOptions) *startCheck {
	c := &startCheck{}
	if opts != nil && opts.WaitForWorkers {
		return c
	}
	c.due = time.Now().Add(a.opts.StartTimeout)
	c.input = InputChannel(a.name)
	c.check = func(ctx context.Context) error {
		if _, err := rt.store.Get(ctx, store.KindRun, id); !errors.Is(err, store.ErrNotFound) {
			return nil // started (or the store cannot tell)
		}
		n, known, err := calf.GroupMembers(ctx, rt.client.Broker(), c.input)
		if err != nil || !known || n > 0 {
			return nil // served, but busy or on another store; or unknown
		}
		cause := fmt.Errorf("%w %s: nothing consumed its input channel %s within %s; start a worker that serves it (calf worker), "+
			"or call Serve in this process, or set RunOptions.WaitForWorkers to wait for one", ErrNotServed, a.name, c.input, a.opts.StartTimeout)
		// Cancel the run only if no worker has taken it meanwhile: a run
		// that has started is waited for.
		if started, err := rt.cancelUnstarted(ctx, id, a.name, cause.Error()); err != nil || started {
			return nil
		}
		return cause
	}
	return c
}

// cancelUnstarted records the run id cancelled for reason if no handler
// has created it yet, so that its input, if it comes, is refused; it
// reports started when the run exists (a worker took it), and cancels
// nothing then.
func (rt *Runtime) cancelUnstarted(ctx context.Context, id, agentName, reason string) (started bool, err error) {
	st := &runState{RunID: id, Agent: agentName, Status: RunCancelled, Error: reason, NotServed: true, StartedAt: rt.now(), EndedAt: rt.now()}
	data, err := st.encode()
	if err != nil {
		return false, err
	}
	_, err = rt.store.Put(ctx, store.KindRun, id, data, 0)
	if errors.Is(err, store.ErrConflict) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if err := rt.emitOutput(ctx, st); err != nil {
		rt.log.Warn("agent: emit the output of a run no process serves", "agent", agentName, "run", id, "err", err)
	}
	return false, nil
}

// waitForWorkers waits, when opts ask for it, until some process serves
// the agent. The input waits in the broker for a worker anyway (its group
// is prepared, see Runtime.prepareInput); waiting here keeps the start
// check from cancelling the run. A broker that cannot tell is not waited
// for.
func (a *Agent[Out]) waitForWorkers(ctx context.Context, rt *Runtime, id string, opts *RunOptions) error {
	if opts == nil || !opts.WaitForWorkers {
		return nil
	}
	in := InputChannel(a.name)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		n, known, err := calf.GroupMembers(ctx, rt.client.Broker(), in)
		if err == nil && (!known || n > 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			re := a.runError(id, RunCancelled, fmt.Sprintf("no process came to serve the agent (its input channel %s) before the caller stopped waiting: %v", in, context.Cause(ctx)))
			re.Err = context.Cause(ctx)
			return re
		case <-time.After(wait):
		}
	}
}

// pending reports whether the check is still to be made.
func (c *startCheck) pending() bool { return !c.due.IsZero() && !c.seen }

// next returns the next message of f, making the start check when it is
// due: it fails with ErrNotServed when no process serves the agent.
func (c *startCheck) next(ctx context.Context, f *calf.Follower) (*calf.Message, error) {
	for c.pending() {
		cctx, cancel := context.WithDeadline(ctx, c.due)
		m, err := f.Next(cctx)
		cancel()
		if err == nil {
			c.seen = m.Channel != c.input
			return m, nil
		}
		if ctx.Err() != nil || cctx.Err() == nil {
			return nil, err
		}
		c.due = time.Time{}
		if err := c.check(ctx); err != nil {
			return nil, err
		}
	}
	return f.Next(ctx)
}

// notServed reports a run that no process serves, which the start check
// has recorded cancelled.
func (a *Agent[Out]) notServed(_ context.Context, _ *Runtime, id string, cause error) error {
	re := a.runError(id, RunCancelled, cause.Error())
	re.Err = ErrNotServed
	return re
}

// abandon cancels a run whose caller stopped waiting, and reports it.
func (a *Agent[Out]) abandon(ctx context.Context, rt *Runtime, id string) error {
	cause := context.Cause(ctx)
	reason := "the caller stopped waiting: " + cause.Error()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, _ := rt.Cancel(bg, RunRef{Kind: "agent", Name: a.name, RunID: id}, reason)
	if st != nil && st.Status != RunCancelled {
		// The run ended just before the caller gave up.
		reason = fmt.Sprintf("the run ended (%s) but the caller stopped waiting: %v", st.Status, cause)
	}
	re := a.runError(id, RunCancelled, reason)
	re.Err = cause
	return re
}

// Cancel ends the run runID with status cancelled, for reason, unless it
// has ended, in whichever process carries it out: a cancelled run emits
// its output (to its reply channel too, if it has one), and its subagent
// runs are cancelled as well. A run that handed off is cancelled where
// its chain continues. A run whose input has not been handled yet is
// created cancelled, so that it never starts. A model call or a tool in
// progress is not interrupted, but the run takes no step after it. The
// approval requests that the cancelled runs were waiting for are recorded
// [approval.Cancelled]. [Runtime.Cancel] does the same for an agent known
// by name.
func (a *Agent[Out]) Cancel(ctx context.Context, rt *Runtime, runID, reason string) error {
	_, err := rt.Cancel(ctx, RunRef{Kind: "agent", Name: a.name, RunID: runID}, reason)
	return err
}

// Cancel cancels the run of an agent that run names, as [Agent.Cancel]
// does, and returns the state the run ends with. The agent may be served
// by any process: Cancel needs only the runtime's broker and store.
func (rt *Runtime) Cancel(ctx context.Context, run RunRef, reason string) (*RunInfo, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if err := run.agentRef("cancel"); err != nil {
		return nil, err
	}
	agentName, runID := run.Name, run.RunID
	var st *runState
	var err error
	for run, name, hops := runID, agentName, 0; ; hops++ {
		st, err = rt.cancelRun(ctx, run, name, reason)
		if err != nil || st.Status != RunHandedOff || st.HandedOffTo == nil || hops > maxChain {
			break
		}
		run, name = st.HandedOffTo.RunID, st.HandedOffTo.Agent
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: cancel run %s: %w", agentName, runID, err)
	}
	if err := rt.readBack(ctx, st); err != nil {
		rt.log.Warn("agent: the cancelled run's history was not read", "agent", st.Agent, "run", st.RunID, "err", err)
	}
	if st.Status == RunCancelled {
		if err := rt.emitOutput(ctx, st); err != nil {
			rt.log.Warn("agent: emit cancelled output", "agent", st.Agent, "run", st.RunID, "err", err)
		}
		rt.cancelSubagents(ctx, st, 0)
	}
	// The approval requests of the runs that ended end with them: nothing
	// would carry out their answers.
	if err := rt.endApprovals(ctx, runID); err != nil {
		rt.log.Warn("agent: end the approval requests of a cancelled run", "agent", agentName, "run", runID, "err", err)
	}
	return st.info()
}

// cancelRun marks the run cancelled unless it has ended, creating it
// cancelled if its input has not been handled yet, and returns its state.
func (rt *Runtime) cancelRun(ctx context.Context, id, agentName, reason string) (*runState, error) {
	var st *runState
	_, err := store.Update(ctx, rt.store, store.KindRun, id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			st = &runState{RunID: id, Agent: agentName, Status: RunCancelled, Error: reason, StartedAt: rt.now(), EndedAt: rt.now()}
			return st.encode()
		}
		var err error
		if st, err = decodeRunState(data); err != nil || st.Status.Terminal() {
			return nil, err
		}
		st.Status, st.Error, st.EndedAt = RunCancelled, reason, rt.now()
		return st.encode()
	})
	rt.runs.Forget(id) // the handlers' copy is behind: they read the store
	return st, err
}

// validate turns the final response text into the output's JSON.
func (a *spec) validate(text string) (json.RawMessage, error) {
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
	if err := a.decodes(v); err != nil {
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
func (a *spec) unknownTool(name string) error {
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
		partial := &partials[Out]{a: a}
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
				m, err = o.next(ctx, f)
			}
			if errors.Is(err, ErrNotServed) {
				yield(Event{}, a.notServed(ctx, rt, id, err))
				return
			}
			if errors.Is(err, errEndGraceOver) {
				// The run has ended, and the tool calls its last events
				// wait for have not come: yield what is held.
				if send(o.flush()) {
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
			if send(o.add(ev)) {
				return
			}
		}
	}
}

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
	var ref subagentRef
	if err := json.Unmarshal([]byte(ev.Output.Ref), &ref); err != nil {
		return err
	}
	ev.RunID, ev.Step = ref.Run, ref.Step
	ev.Subagent = &SubagentEvent{Step: ref.Step, ToolCallID: ref.Call, ToolName: ref.Tool, Agent: ev.Output.Agent, RunID: ev.Output.RunID}
	return nil
}
