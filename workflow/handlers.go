package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/store"
)

// ServeOptions configures [Workflow.Serve]. A nil *ServeOptions means the
// defaults.
type ServeOptions struct {
	// Concurrency bounds how many runs (and branches) each handler works
	// on at once. Zero means the broker's default.
	Concurrency int
	// MaxAttempts bounds deliveries of a message whose handling fails on
	// infrastructure errors before it is dead-lettered. Zero means the
	// broker's default.
	MaxAttempts int
}

// Serve subscribes the workflow's handlers on rt: input, step, agent
// replies, resume, pause and cancel. Several processes may serve the same workflow: they
// share the work through the broker's consumer groups. The agents of
// agent nodes must be served too, here or elsewhere. The subscriptions
// last until the runtime's client shuts down. On a runtime that serves on
// demand ([agent.RuntimeOptions.ServeOnDemand]), Run, RunStream, Submit,
// Recover, Answer and Fork then do not serve the workflow again, and
// agent and sub-workflow nodes serve theirs. A nil rt returns an error
// matching [agent.ErrNoRuntime].
func (w *Workflow[S]) Serve(ctx context.Context, rt *agent.Runtime, opts *ServeOptions) error {
	if rt == nil {
		return fmt.Errorf("workflow %s: serve: %w", w.name, agent.ErrNoRuntime)
	}
	return w.served.Serve(rt, func() error { return w.serve(ctx, rt, opts) })
}

// onDemand returns rt with the workflow served on it in this process when
// rt serves on demand (once: not again if [Workflow.Serve] served it
// there), or an error matching [agent.ErrNoRuntime] when rt is nil.
func (w *Workflow[S]) onDemand(ctx context.Context, rt *agent.Runtime) (*agent.Runtime, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: %w", w.name, agent.ErrNoRuntime)
	}
	rt.AddKind(Kind) // for the runtime's controls by name
	if !rt.ServesOnDemand() {
		return rt, nil
	}
	if _, err := w.served.Once(ctx, rt, func(ctx context.Context) error { return w.serve(ctx, rt, nil) }); err != nil {
		return nil, fmt.Errorf("workflow %s: serve on demand: %w", w.name, err)
	}
	return rt, nil
}

// serve is Serve on rt, which is not nil.
func (w *Workflow[S]) serve(ctx context.Context, rt *agent.Runtime, opts *ServeOptions) error {
	h := &handlers[S]{w: w, rt: rt}
	rt.AddSweeper("workflow", sweepRuns)
	rt.AddKind(Kind)
	rt.ServeTimers()
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	input, err := rt.FlowGate(ctx, "workflow", w.name, w.opts.Flow, h.onInput, nil)
	if err != nil {
		return fmt.Errorf("workflow %s: serve: %w", w.name, err)
	}
	for _, s := range []struct {
		channel string
		fn      calf.Handler
	}{
		{InputChannel(w.name), input},
		{StepChannel(w.name), h.onStep},
		{ReplyChannel(w.name), h.onReply},
		{ResumeChannel(w.name), h.onResume},
		{PauseChannel(w.name), h.onPause},
		{CancelChannel(w.name), h.onCancel},
	} {
		if err := rt.Client().Handle(ctx, s.channel, s.fn, &calf.SubscribeOptions{
			Group: s.channel, Concurrency: o.Concurrency, MaxAttempts: o.MaxAttempts,
		}); err != nil {
			return fmt.Errorf("workflow %s: serve: %w", w.name, err)
		}
	}
	return nil
}

// RecoverOptions configures [Workflow.Recover], as [agent.RecoverOptions]
// does an agent's (Runs names the workflow's runs). A nil *RecoverOptions
// means the defaults.
type RecoverOptions = agent.RecoverOptions

// Recover emits again, for every unfinished run of the workflow recorded
// in rt's store, what the run waits for: the step events of the nodes its
// current step has not completed (and its last checkpoint, if missing).
// Call it when a process starts on a broker that loses in-flight messages
// when the process dies, such as the in-memory broker. The events carry
// the handlers' ids, and the handlers skip a step whose node has
// completed, so Recover is idempotent and harmless on a durable broker. An
// interrupted run is left alone: it waits for [Workflow.Answer]; a run
// resumed whose node has not completed gets its resume event again. An agent
// node's own run is the agent's to recover ([agent.Agent.Recover]); the
// step of an agent node submits it again, which is a no-op for a run that
// exists. It returns how many runs it continued.
func (w *Workflow[S]) Recover(ctx context.Context, rt *agent.Runtime, opts *RecoverOptions) (int, error) {
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return 0, err
	}
	var o RecoverOptions
	if opts != nil {
		o = *opts
	}
	h := &handlers[S]{w: w, rt: rt}
	var ids []string // nil: every run of the workflow
	if o.Runs != nil {
		ids = make([]string, 0, len(o.Runs))
		for _, id := range o.Runs {
			ids = append(ids, recordID(w.name, id))
		}
	}
	r := runlife.Recovery{
		What: fmt.Sprintf("workflow %s: recover", w.name), Store: rt.Store(), Kind: store.KindWorkflow, Prefix: w.name + "/",
		Runs: ids, WrittenBefore: o.WrittenBefore,
		One: func(ctx context.Context, rec store.Record) (bool, error) {
			st, err := decodeRunState(rec.Data)
			switch {
			case err != nil:
				return false, err
			case st.Paused() && st.Emitted >= st.Seq:
				return false, nil // it waits for its resume
			case st.Status == RunRunning:
			case st.Status.Terminal() && !o.EndedAfter.IsZero() && !st.EndedAt.Before(o.EndedAfter):
			default:
				return false, nil
			}
			return true, h.emitPending(ctx, st)
		},
	}
	return r.Run(ctx)
}

type handlers[S any] struct {
	w  *Workflow[S]
	rt *agent.Runtime
}

func runOf(msg *calf.Message) (string, error) {
	if msg.Metadata.RunID == "" {
		return "", calf.Permanent(fmt.Errorf("workflow: message %s on %s has no run id", msg.ID, msg.Channel))
	}
	return msg.Metadata.RunID, nil
}

func (h *handlers[S]) load(ctx context.Context, run string) (*runState, error) {
	st, err := h.w.loadRunState(ctx, h.rt, run)
	if errors.Is(err, store.ErrNotFound) {
		return nil, calf.Permanent(err)
	}
	return st, err
}

// commit applies fn to the run's stored state with a compare-and-swap. fn
// reports whether it changed the state; commit returns the state and
// whether fn changed it.
func (h *handlers[S]) commit(ctx context.Context, run string, fn func(st *runState) bool) (*runState, bool, error) {
	var st *runState
	changed := false
	_, err := store.Update(ctx, h.rt.Store(), store.KindWorkflow, recordID(h.w.name, run), func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, calf.Permanent(fmt.Errorf("workflow %s: run %s: %w", h.w.name, run, store.ErrNotFound))
		}
		var err error
		if st, err = decodeRunState(data); err != nil {
			return nil, calf.Permanent(err)
		}
		if changed = fn(st); !changed {
			return nil, nil
		}
		return json.Marshal(st)
	})
	return st, changed, err
}

// emit publishes an event of the run with a deterministic id.
func (h *handlers[S]) emit(ctx context.Context, channel, run, id string, data any) error {
	_, err := h.rt.Client().Emit(ctx, channel, data, calf.WithID(id), calf.WithKey(run),
		calf.WithMetadata(calf.Metadata{CorrelationID: run, RunID: run}))
	return err
}

// emitPending saves the run's last checkpoint if it is missing, emits what
// follows from the run's state, and records that it did.
func (h *handlers[S]) emitPending(ctx context.Context, st *runState) error {
	if err := h.emitState(ctx, st); err != nil {
		return err
	}
	seq := st.Seq
	_, _, err := h.commit(ctx, st.RunID, func(st *runState) bool {
		if st.Emitted >= seq {
			return false
		}
		st.Emitted = seq
		return true
	})
	return err
}

// emitState emits what follows from the run's state: the completion of the
// last step, then the steps of the nodes still to run, or the output.
func (h *handlers[S]) emitState(ctx context.Context, st *runState) error {
	if err := h.w.saveCheckpoint(ctx, h.rt, st); err != nil {
		return err
	}
	run := st.RunID
	if st.LastStep > 0 {
		ev := NodeDoneEvent{Step: st.LastStep, Node: st.LastNode, Checkpoint: st.Checkpoint, Next: h.w.nextNames(st), State: st.State}
		if err := h.emit(ctx, NodeDoneChannel(h.w.name), run, nodeDoneID(run, st.LastStep), ev); err != nil {
			return err
		}
	}
	switch st.Status {
	case RunRunning:
		if st.Paused() {
			ev := agent.PauseEvent{Step: st.Step, Paused: true, Reason: st.Pause.Reason}
			return h.emit(ctx, PauseChannel(h.w.name), run, runlife.PauseID(run, st.Step, st.Unpaused), ev)
		}
		if st.unpausedHere() {
			if err := emitUnpause(ctx, h.rt, st); err != nil {
				return err
			}
		}
		if st.resumed() {
			return h.emit(ctx, ResumeChannel(h.w.name), run, resumeID(run, st.Resumed), ResumeEvent{Interrupt: st.Resumed, Input: st.ResumeInput})
		}
		if st.FanOut == "" {
			return h.emitStep(ctx, st, st.Node, run)
		}
		f := h.w.fanOuts[st.FanOut]
		if f == nil {
			// The run was saved by a version of the workflow with another graph.
			return h.fail(ctx, run, st.Step, fmt.Sprintf("the workflow has no parallel step after %q", st.FanOut), "")
		}
		for _, b := range f.branches {
			if bs := st.Branches[b]; bs != nil && bs.Done {
				continue
			}
			// A branch has its own key, so that the branches run at once.
			if err := h.emitStep(ctx, st, b, run+"/"+b); err != nil {
				return err
			}
		}
		return nil
	case RunInterrupted:
		// The run waits for the signal that answers its interrupt (sent
		// by Answer), whose wake is the resume event, then says so: a
		// caller told the run is interrupted finds its wait recorded.
		if err := h.awaitAnswer(ctx, run, st.Interrupts); err != nil {
			return err
		}
		ev := OutputEvent{Status: OutputInterrupted, Interrupt: st.Interrupt, Steps: st.Step, RunID: run, Usage: st.Usage, Cost: st.Cost}
		return h.emit(ctx, OutputChannel(h.w.name), run, interruptedID(run, st.Interrupts), ev)
	}
	if !st.SleepUntil.IsZero() || !st.WaitUntil.IsZero() {
		// Ended while it slept or waited (cancelled): its timers go.
		if err := stopTimers(ctx, h.rt, h.w.name, run); err != nil {
			return err
		}
	}
	switch st.Status {
	case RunComplete:
		ev := OutputEvent{Status: OutputComplete, State: st.State, Steps: st.LastStep, RunID: run, Usage: st.Usage, Cost: st.Cost}
		if err := h.emit(ctx, OutputChannel(h.w.name), run, outputID(run), ev); err != nil {
			return err
		}
	default:
		ev := OutputEvent{Status: OutputFailed, Error: st.Error, ErrorKind: st.ErrorKind, Steps: st.Step, RunID: run, Usage: st.Usage, Cost: st.Cost}
		if st.Status == RunCancelled {
			ev.Status = OutputCancelled
		}
		if err := h.emit(ctx, OutputChannel(h.w.name), run, outputID(run), ev); err != nil {
			return err
		}
	}
	return h.reply(ctx, st)
}

// reply reports the end of a run to its ReplyTo, as an agent.OutputEvent.
func (h *handlers[S]) reply(ctx context.Context, st *runState) error {
	r := st.ReplyTo
	if r == nil || r.Channel == "" {
		return nil
	}
	ev := agent.OutputEvent{Status: agent.OutputFailed, Error: st.Error, Steps: st.LastStep, RunID: st.RunID, Agent: h.w.name, Ref: r.Ref, Usage: st.Usage, Cost: st.Cost}
	switch st.Status {
	case RunComplete:
		ev.Status, ev.Content = agent.OutputComplete, st.State
	case RunCancelled:
		ev.Status = agent.OutputCancelled
	}
	corr, key := r.CorrelationID, r.Key
	if corr == "" {
		corr = st.RunID
	}
	if key == "" {
		key = st.RunID
	}
	_, err := h.rt.Client().Emit(ctx, r.Channel, ev, calf.WithID(replyID(st.RunID)), calf.WithKey(key),
		calf.WithMetadata(calf.Metadata{CorrelationID: corr, RunID: st.RunID}))
	return err
}

func (w *Workflow[S]) nextNames(st *runState) []string {
	switch {
	case st.Status == RunFailed || st.Status == RunCancelled:
		return nil
	case st.FanOut != "" && w.fanOuts[st.FanOut] != nil:
		return slices.Clone(w.fanOuts[st.FanOut].branches)
	default:
		return []string{st.Node}
	}
}

// stale handles an event the run has moved past: a duplicate, or a
// redelivery after a crash. If the run's last transition was saved but
// its events are not recorded as emitted, the worker that saved it may
// have stopped before emitting them, so they are emitted again (with
// their original ids); otherwise the event is dropped.
func (h *handlers[S]) stale(ctx context.Context, _ *calf.Message, st *runState) error {
	if st.Emitted >= st.Seq {
		return nil
	}
	return h.emitPending(ctx, st)
}

// onInput creates a run, or a fork of a run, and emits its first step.
func (h *handlers[S]) onInput(ctx context.Context, msg *calf.Message) error {
	run, err := runOf(msg)
	if err != nil {
		return err
	}
	var ev InputEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	now := h.rt.Client().Now()
	st := &runState{Workflow: h.w.name, RunID: run, Status: RunRunning, Seq: 1, StartedAt: now, CheckpointAt: now, From: ev.From,
		ReplyTo: ev.ReplyTo, Parent: ev.Parent, Budget: ev.Budget}
	if ev.From != nil {
		cp, err := h.w.loadCheckpoint(ctx, h.rt, ev.From.Run, ev.From.Seq)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return calf.Permanent(err)
			}
			return err
		}
		st.Position, st.State = cp.Next, cp.State
		st.LastNode = fmt.Sprintf("fork of %s at checkpoint %d", ev.From.Run, ev.From.Seq)
		if st.Node == End {
			st.Status, st.EndedAt = RunComplete, now
		}
	} else {
		st.Position = Position{Step: 1, Node: h.w.entry, Visits: map[string]int{h.w.entry: 1}}
		st.State = ev.State
	}
	if ev.State != nil {
		st.State = ev.State
	}
	if st.Status == RunRunning {
		st.Children = h.w.stepChildren(st)
	}
	var s S
	if err := json.Unmarshal(st.State, &s); err != nil {
		st.Status, st.EndedAt = RunFailed, now
		st.Error = fmt.Sprintf("the input state does not decode into %T: %v", s, err)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := h.rt.Store().Put(ctx, store.KindWorkflow, recordID(h.w.name, run), data, 0); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		old, err := h.load(ctx, run)
		if err != nil {
			return err
		}
		if old.Status == RunCancelled && old.Step == 0 {
			// Cancelled before its input arrived (by its parent): it
			// never runs, and answers whoever submitted it.
			old.ReplyTo = ev.ReplyTo
			return h.emitCancelledUnstarted(ctx, old)
		}
		if old.Status.Terminal() && old.Emitted >= old.Seq {
			// A run started again after it ended answers again.
			return h.emitState(ctx, old)
		}
		return h.stale(ctx, msg, old)
	}
	if err := h.rt.StartDeadline(ctx, agent.RunRef{Kind: "workflow", Name: h.w.name, RunID: run}, ev.Deadline); err != nil {
		return err
	}
	return h.emitPending(ctx, st)
}

// createCancelled records the run id, whose input has not been handled,
// as cancelled before it started. It reports false when the run exists
// (its input was handled meanwhile).
func (h *handlers[S]) createCancelled(ctx context.Context, run, reason string, now time.Time) (bool, error) {
	return createCancelled(ctx, h.rt, h.w.name, run, reason, now)
}

// createCancelled records the run run of the workflow named workflow
// cancelled, unless it is recorded: its input, when it comes, finds it
// ended. It reports whether it recorded it.
func createCancelled(ctx context.Context, rt *agent.Runtime, workflow, run, reason string, now time.Time) (bool, error) {
	st := &runState{Workflow: workflow, RunID: run, Status: RunCancelled, Error: reason, Seq: 1, Emitted: 1,
		StartedAt: now, EndedAt: now}
	data, err := json.Marshal(st)
	if err != nil {
		return false, err
	}
	if _, err := rt.Store().Put(ctx, store.KindWorkflow, recordID(workflow, run), data, 0); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// emitCancelledUnstarted emits the output of a run cancelled before it
// started, and its reply: it has no step and no checkpoint.
func (h *handlers[S]) emitCancelledUnstarted(ctx context.Context, st *runState) error {
	ev := OutputEvent{Status: OutputCancelled, Error: st.Error, RunID: st.RunID, Usage: st.Usage, Cost: st.Cost}
	if err := h.emit(ctx, OutputChannel(h.w.name), st.RunID, outputID(st.RunID), ev); err != nil {
		return err
	}
	return h.reply(ctx, st)
}

// pending reports whether the run's current step still has to run node.
func (st *runState) pending(step int, node string) bool {
	if st.Status != RunRunning || st.Step != step {
		return false
	}
	if st.FanOut == "" {
		return st.Node == node
	}
	bs := st.Branches[node]
	return bs == nil || !bs.Done
}

// onStep runs one node.
func (h *handlers[S]) onStep(ctx context.Context, msg *calf.Message) error {
	run, err := runOf(msg)
	if err != nil {
		return err
	}
	var ev StepEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	st, err := h.load(ctx, run)
	if err != nil {
		return err
	}
	if !st.pending(ev.Step, ev.Node) || !h.w.runs(st, ev.Node) || st.resumed() {
		// A resumed step is the resume event's to run: a step message of
		// the node from before its interrupt (redelivered after a crash of
		// the worker that interrupted it) would run it a second time, at
		// once with the resume event's handler.
		return h.stale(ctx, msg, st)
	}
	if st.Paused() {
		return h.stale(ctx, msg, st)
	}
	if st.sleeping() && st.SleepUntil.After(h.rt.Client().Now()) {
		// Early (a step event emitted again before the wake time): the
		// timer starts the step, and is started if it is not.
		key := st.RunID
		if st.FanOut != "" {
			key += "/" + ev.Node
		}
		return h.emitStep(ctx, st, ev.Node, key)
	}
	if st.Pause != nil && st.FanOut == "" {
		// Asked to pause: the node waits for the resume (the branches of
		// a parallel step all run; the pause takes effect after them).
		return h.pauseTakesEffect(ctx, msg, st, ev.Node)
	}
	return h.execute(ctx, st, ev.Node)
}

// resumed reports whether the run's current step was resumed with input
// and has not completed: the resume event runs it (see onResume).
func (st *runState) resumed() bool {
	return st.Status == RunRunning && st.FanOut == "" && st.Resumed > 0 && st.ResumeInput != nil
}

// runs reports whether the run's current step runs node.
func (w *Workflow[S]) runs(st *runState, node string) bool {
	if st.FanOut == "" {
		return st.Node == node
	}
	f := w.fanOuts[st.FanOut]
	return f != nil && slices.Contains(f.branches, node)
}

// execute runs node at the run's current step: a function node is called
// and its result recorded; an agent node starts its agent's run, whose
// reply completes the step.
func (h *handlers[S]) execute(ctx context.Context, st *runState, node string) error {
	n, ok := h.w.nodes[node]
	if !ok {
		return h.fail(ctx, st.RunID, st.Step, fmt.Sprintf("the workflow has no node %q", node), "")
	}
	var s S
	if err := json.Unmarshal(st.State, &s); err != nil {
		return h.fail(ctx, st.RunID, st.Step, fmt.Sprintf("decode the state for node %q: %v", node, err), "")
	}
	if n.agent != nil {
		reply := &agent.ReplyTo{Channel: ReplyChannel(h.w.name), Key: st.RunID, CorrelationID: st.RunID, Ref: replyRef(st.Step, node)}
		err := n.agent.submit(ctx, h.rt, s, childRunID(st.RunID, st.Step, node), st.RunID, reply, st.childBudget())
		var pe *promptError
		if errors.As(err, &pe) {
			return h.fail(ctx, st.RunID, st.Step, fmt.Sprintf("agent node %q: %v", node, pe.err), "")
		}
		return err
	}
	key := st.RunID
	if st.FanOut != "" {
		key += "/" + node
	}
	nw := &nodeWaits{rt: h.rt, st: st, key: key}
	info := StepInfo{Workflow: h.w.name, RunID: st.RunID, Step: st.Step, Node: node, resume: st.ResumeInput, waits: nw}
	nctx, cancel := context.WithTimeoutCause(withInfo(ctx, info), h.w.opts.NodeTimeout,
		fmt.Errorf("node %q timed out after %s (Options.NodeTimeout)", node, h.w.opts.NodeTimeout))
	out, err := h.call(nctx, n.fn, s)
	timedOut := nctx.Err() != nil
	cause := context.Cause(nctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: the step is delivered again
		}
		if timedOut {
			return h.fail(ctx, st.RunID, st.Step, cause.Error(), "")
		}
		var ie *InterruptError
		if errors.As(err, &ie) {
			return h.interrupt(ctx, st, node, ie.Reason)
		}
		var we *waitError
		if errors.As(err, &we) && nw.waiting != "" {
			return h.waitFor(ctx, st, node, nw) // the signal, or the timeout, runs the node again
		}
		var se *SleepError
		if errors.As(err, &se) {
			return h.completeAt(ctx, st.RunID, st.Step, node, out, nil, se.wake(h.rt.Client().Now()))
		}
		return h.fail(ctx, st.RunID, st.Step, fmt.Sprintf("node %q: %v", node, err), "")
	}
	return h.complete(ctx, st.RunID, st.Step, node, out, nil)
}

// call runs a node function, turning a panic into an error (whose stack
// goes to the log, not into the run's recorded error).
func (h *handlers[S]) call(ctx context.Context, fn func(context.Context, S) (S, error), s S) (out S, err error) {
	defer func() {
		if r := recover(); r != nil {
			info, _ := Info(ctx)
			h.rt.Client().Logger().Error("workflow: node panicked", "workflow", h.w.name, "run", info.RunID, "node", info.Node, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn(ctx, s)
}

// complete records that node finished step with state out, moves the run
// on, and emits what follows.
func (h *handlers[S]) complete(ctx context.Context, run string, step int, node string, out S, spent *agent.Spent) error {
	return h.completeAt(ctx, run, step, node, out, spent, time.Time{})
}

// completeAt is complete for a node that has the run go on at wake (when
// set, see [SleepError]).
func (h *handlers[S]) completeAt(ctx context.Context, run string, step int, node string, out S, spent *agent.Spent, wake time.Time) error {
	data, err := json.Marshal(out)
	if err != nil {
		return h.fail(ctx, run, step, fmt.Sprintf("node %q: encode state: %v", node, err), "")
	}
	now := h.rt.Client().Now()
	advanced := false
	st, changed, err := h.commit(ctx, run, func(st *runState) bool {
		if !st.pending(step, node) || !h.w.runs(st, node) {
			return false
		}
		if spent != nil { // an agent node's run
			st.Usage, st.Cost = st.Usage.Add(spent.Usage), st.Cost.Add(spent.Cost)
		}
		before := st.Seq
		defer func() { advanced = st.Seq != before }()
		if st.FanOut == "" {
			h.w.moveOn(st, node, data, func(s S) (string, error) { return h.w.successor(node, s) }, now)
			st.sleepAfter(wake, now)
			return true
		}
		if st.Branches == nil {
			st.Branches = map[string]*branchState{}
		}
		st.Branches[node] = &branchState{Done: true, State: data, Wake: wake}
		f := h.w.fanOuts[st.FanOut]
		states := make([]S, 0, len(f.branches))
		for _, b := range f.branches {
			bs := st.Branches[b]
			if bs == nil || !bs.Done {
				return true // others still run
			}
			var s S
			if err := json.Unmarshal(bs.State, &s); err != nil {
				st.failed(fmt.Sprintf("branch %q: decode state: %v", b, err), "", now)
				return true
			}
			states = append(states, s)
		}
		var base S
		if err := json.Unmarshal(st.State, &base); err != nil {
			st.failed(fmt.Sprintf("decode the state of %q: %v", st.FanOut, err), "", now)
			return true
		}
		merged, err := f.merge(base, states)
		if err != nil {
			st.failed(fmt.Sprintf("merge the branches after %q: %v", st.FanOut, err), "", now)
			return true
		}
		mdata, err := json.Marshal(merged)
		if err != nil {
			st.failed(fmt.Sprintf("merge the branches after %q: encode state: %v", st.FanOut, err), "", now)
			return true
		}
		latest := time.Time{} // the latest of the branches' wake times
		for _, b := range f.branches {
			if w := st.Branches[b].Wake; w.After(latest) {
				latest = w
			}
		}
		h.w.moveOn(st, strings.Join(f.branches, ","), mdata, func(S) (string, error) { return f.join, nil }, now)
		st.sleepAfter(latest, now)
		return true
	})
	if err != nil || !changed || !advanced {
		return err
	}
	return h.emitPending(ctx, st)
}

func (st *runState) failed(reason, kind string, now time.Time) {
	st.Seq++
	st.Status, st.Error, st.ErrorKind, st.EndedAt = RunFailed, reason, kind, now
	st.Branches, st.ResumeInput, st.Children = nil, nil, nil
}

// Error kinds of a failed run, in [OutputEvent.ErrorKind].
const (
	// ErrorKindLimit marks a run stopped by MaxSteps or MaxVisits.
	ErrorKindLimit = "limit"
	// ErrorKindNotServed marks a run failed because no process serves the
	// agent of one of its agent nodes (agent.ErrNotServed).
	ErrorKindNotServed = "not_served"
)

// moveOn records that the run's current step completed with state data
// (what ran is named by label), saves it as the next checkpoint, and moves
// the run to what next chooses: a node, a parallel step, or End.
func (w *Workflow[S]) moveOn(st *runState, label string, data json.RawMessage, next func(S) (string, error), now time.Time) {
	st.Seq++
	st.State = data
	st.LastStep, st.LastNode = st.Step, label
	st.Checkpoint++
	st.CheckpointAt = now
	st.Branches, st.ResumeInput, st.Resumed, st.Children = nil, nil, 0, nil
	st.WaitingFor, st.WaitStep, st.WaitUntil = "", 0, time.Time{}
	var s S
	if err := json.Unmarshal(data, &s); err != nil {
		st.failed(fmt.Sprintf("after %s: decode state: %v", label, err), "", now)
		return
	}
	to, err := next(s)
	if err != nil {
		st.failed(fmt.Sprintf("after %s: %v", label, err), "", now)
		return
	}
	if to == End {
		st.Status, st.Node, st.FanOut, st.EndedAt = RunComplete, End, "", now
		return
	}
	if st.Step+1 > w.opts.MaxSteps {
		st.failed(fmt.Sprintf("the run needs more than %d steps (Options.MaxSteps)", w.opts.MaxSteps), ErrorKindLimit, now)
		return
	}
	st.Step++
	enter := []string{to}
	st.Node, st.FanOut = to, ""
	if strings.HasPrefix(to, fanOutPrefix) {
		from := strings.TrimPrefix(to, fanOutPrefix)
		st.Node, st.FanOut = "", from
		enter = w.fanOuts[from].branches
	}
	for _, n := range enter {
		st.Visits[n]++
		if lim := w.visitLimit(n); st.Visits[n] > lim {
			st.Visits[n]--
			st.Step--
			st.failed(fmt.Sprintf("node %q would run %d times, over its limit of %d (MaxVisits): a loop did not end", n, lim+1, lim), ErrorKindLimit, now)
			return
		}
	}
	st.Children = w.stepChildren(st)
	// A pause asked takes effect here, before the next step starts.
	st.pauseHere(now)
}

// fanOutPrefix marks a successor that is a parallel step.
const fanOutPrefix = "parallel:"

// successor returns what runs after node given the state it left: a node,
// End, or fanOutPrefix+node for the parallel step after node.
func (w *Workflow[S]) successor(node string, s S) (string, error) {
	if _, ok := w.fanOuts[node]; ok {
		return fanOutPrefix + node, nil
	}
	if r := w.routes[node]; r != nil {
		to := r.fn(s)
		if !slices.Contains(r.targets, to) {
			return "", fmt.Errorf("the route after %q chose %q, which is not one of its targets %q", node, to, r.targets)
		}
		return to, nil
	}
	return w.next[node], nil
}

// fail ends the run with an error, unless it has moved past step.
func (h *handlers[S]) fail(ctx context.Context, run string, step int, reason, kind string) error {
	now := h.rt.Client().Now()
	st, changed, err := h.commit(ctx, run, func(st *runState) bool {
		if st.Status.Terminal() || st.Step != step {
			return false
		}
		st.failed(reason, kind, now)
		return true
	})
	if err != nil || !changed {
		return err
	}
	return h.emitPending(ctx, st)
}

// interrupt suspends the run at node until a resume event arrives.
func (h *handlers[S]) interrupt(ctx context.Context, st *runState, node, reason string) error {
	if st.FanOut != "" {
		return h.fail(ctx, st.RunID, st.Step, fmt.Sprintf("node %q interrupted (%s), but a branch of a parallel step cannot interrupt", node, reason), "")
	}
	step := st.Step
	st, changed, err := h.commit(ctx, st.RunID, func(st *runState) bool {
		if !st.pending(step, node) {
			return false
		}
		st.Interrupts++
		st.Seq++
		st.Status = RunInterrupted
		st.Interrupt = &InterruptInfo{N: st.Interrupts, Step: step, Node: node, Reason: reason}
		st.ResumeInput, st.Resumed = nil, 0
		return true
	})
	if err != nil || !changed {
		return err
	}
	return h.emitPending(ctx, st)
}

// resume records that interrupt n is answered with input.
func (st *runState) resume(n int, input json.RawMessage) {
	st.Status, st.Interrupt = RunRunning, nil
	st.Resumed, st.ResumeInput = n, input
}

// onResume resumes an interrupted run: it takes the signal that answers
// the interrupt, records the input, then runs the interrupted node again,
// which finds the input with [ResumeInput].
func (h *handlers[S]) onResume(ctx context.Context, msg *calf.Message) error {
	run, err := runOf(msg)
	if err != nil {
		return err
	}
	var ev ResumeEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	n := ev.Interrupt
	st, err := h.load(ctx, run)
	if err != nil {
		return err
	}
	answered := st.resumed() && st.Resumed == n
	if !answered && (st.Status != RunInterrupted || st.Interrupts != n) {
		return h.stale(ctx, msg, st)
	}
	// Answer records the input in the run's state before it sends the
	// signal; a resume event with its input (from a version before the
	// signal) may come for a run still interrupted.
	input := ev.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	st, _, err = h.commit(ctx, run, func(st *runState) bool {
		if st.Status != RunInterrupted || st.Interrupts != n {
			return false
		}
		st.resume(n, input)
		return true
	})
	if err != nil {
		return err
	}
	if st.Status != RunRunning || st.Resumed != n || st.ResumeInput == nil {
		return h.stale(ctx, msg, st)
	}
	// The wait for the answer is over.
	if err := signals.Answered(ctx, signalEnv(h.rt), signalKey(h.w.name, run), interruptSignal(n)); err != nil {
		return err
	}
	return h.execute(ctx, st, st.Node)
}

// onReply completes an agent node with its agent run's output.
func (h *handlers[S]) onReply(ctx context.Context, msg *calf.Message) error {
	run := msg.Metadata.CorrelationID
	if run == "" {
		return calf.Permanent(fmt.Errorf("workflow: reply %s has no correlation id", msg.ID))
	}
	var ev agent.OutputEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	step, node, err := parseRef(ev.Ref)
	if err != nil {
		return calf.Permanent(err)
	}
	st, err := h.load(ctx, run)
	if err != nil {
		return err
	}
	n := h.w.nodes[node]
	if !st.pending(step, node) || !h.w.runs(st, node) || n.agent == nil {
		return h.stale(ctx, msg, st)
	}
	s, base := *new(S), st.State
	if err := json.Unmarshal(base, &s); err != nil {
		return h.fail(ctx, run, step, fmt.Sprintf("decode the state for node %q: %v", node, err), "")
	}
	out, err := n.agent.apply(s, &ev)
	if err != nil {
		kind := ""
		if errors.Is(err, agent.ErrNotServed) {
			kind = ErrorKindNotServed
		}
		return h.fail(ctx, run, step, fmt.Sprintf("agent node %q: %v", node, err), kind)
	}
	return h.complete(ctx, run, step, node, out, &agent.Spent{Usage: ev.Usage, Cost: ev.Cost})
}
