package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
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
	// IdempotencyKey, when set, is the caller's key for this request: the
	// same request under the same key, within the runtime's
	// [RuntimeOptions.IdempotencyWindow] (from any process, after
	// restarts), gets the run the first one started and its answer, not a
	// second run; a different request (another prompt, session, thread,
	// parts or deps) under a key in use is refused with an error matching
	// [ErrIdempotencyConflict]. The key is the agent's: another agent's
	// runs do not share it. Kept in the store, and swept with retention.
	IdempotencyKey string
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
	st, err := engine.UntilAvailable(ctx, func() (*runState, error) { return rt.lastOfChain(ctx, runID) })
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
	st, err := engine.UntilAvailable(ctx, func() (*runState, error) {
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
		Agent: st.Agent, RunID: st.RunID, SessionID: st.SessionID, Chain: hops(st.Chain),
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

// Cancel cancels the run that run names, of any kind: an agent's run as
// [Agent.Cancel] does, a team's or a workflow's as theirs do (see
// [RunKind]), and returns the run as it stands (an agent's run as it
// ends). The run may be served by any process: Cancel needs only the
// runtime's broker and store.
func (rt *Runtime) Cancel(ctx context.Context, run RunRef, reason string) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if k, err := rt.runKind(run, "cancel"); k != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return k.Cancel(ctx, rt, run, reason)
	}
	return agentView(rt.cancelAgentRun(ctx, run, reason))
}

// cancelAgentRun is Cancel for an agent's run.
func (rt *Runtime) cancelAgentRun(ctx context.Context, run RunRef, reason string) (*RunInfo, error) {
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
	if err := engine.EndApprovals(ctx, rt.store, runID, rt.now); err != nil {
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
