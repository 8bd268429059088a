package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/store"
)

// ErrLimit is matched by the error of a run that a bound (MaxSteps,
// MaxVisits) stopped: an *agent.RunError that matches agent.ErrRunFailed
// too.
var ErrLimit = errors.New("workflow: limit exceeded")

// RunOptions configures a run. A nil *RunOptions means the defaults.
type RunOptions struct {
	// RunID names the run. Default: a fresh id. Starting a run id again
	// does not start a second run: once the first has ended, it reports
	// its end again.
	RunID string
	// ReplyTo, for [Workflow.Submit], names where the run's end is reported
	// besides the output channel, as an agent.OutputEvent whose Content is
	// the final state: a parent learns of it as of an agent run's end.
	ReplyTo *agent.ReplyTo
	// Parent is the id of the run that starts this one, if any; it is
	// recorded in the run's state.
	Parent string
	// Budget, when set, bounds what the run spends: the model calls of
	// its agent nodes' runs and its sub-workflows' runs, and of every run
	// they start. Each such child run gets what is left of it once the
	// child runs that have finished are counted ([agent.Budget.Remaining]),
	// in place of its agent's own budget; the branches of a parallel step
	// each get all of that, so together they may pass it by up to their
	// number of calls. A child run that would pass its part pauses (or
	// fails, with Fail), as an agent's run does; [agent.Runtime.SetBudget]
	// with the run's [agent.RunRef] changes the budget, and the parts of
	// the child runs in flight (see [Kind]). A fork has no budget.
	Budget *agent.Budget
	// IdempotencyKey, when set, is the caller's key for this request: the
	// same state under the same key, within the runtime's
	// [agent.RuntimeOptions.IdempotencyWindow], gets the run the first
	// request started and its end, not a second run; another state under
	// a key in use is refused with an error matching
	// [agent.ErrIdempotencyConflict]. The key is the workflow's.
	IdempotencyKey string
	// Deadline, when set, ends the run when it passes, wherever it is (a
	// node running, a sleep, a wait for a signal or an answer, a pause, a
	// slot under flow control): a durable timer, fired by whichever
	// process serves timers then, cancels the run with the reason "timed
	// out: ..." (see [agent.Runtime.StartDeadline]).
	Deadline time.Time
}

// input builds the input message of a new run.
func (w *Workflow[S]) input(ctx context.Context, rt *agent.Runtime, ev *InputEvent, runID string) (*calf.Message, error) {
	if runID == "" {
		runID = calf.NewID()
	}
	return rt.Client().NewMessage(ctx, InputChannel(w.name), ev, calf.WithID(inputID(runID)), calf.WithKey(runID),
		calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID}))
}

func (w *Workflow[S]) newInput(ctx context.Context, rt *agent.Runtime, s S, opts *RunOptions) (*calf.Message, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: encode state: %w", w.name, err)
	}
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if b := o.Budget; b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("workflow %s: RunOptions.Budget: %w", w.name, err)
		}
	}
	ev := &InputEvent{State: data, ReplyTo: o.ReplyTo, Parent: o.Parent, Budget: o.Budget, Deadline: o.Deadline}
	if o.IdempotencyKey != "" {
		req := *ev
		req.ReplyTo = nil // where the end is reported is not the request
		if o.RunID, err = rt.RunForKey(ctx, "workflow/"+w.name, o.IdempotencyKey, &req, o.RunID); err != nil {
			return nil, fmt.Errorf("workflow %s: %w", w.name, err)
		}
	}
	return w.input(ctx, rt, ev, o.RunID)
}

// Submit starts a run on state s without waiting for it, and returns its
// id. The run is carried out by whichever processes serve the workflow;
// [Workflow.Wait] waits for it. Submitting a run id again starts nothing
// new.
func (w *Workflow[S]) Submit(ctx context.Context, rt *agent.Runtime, s S, opts *RunOptions) (string, error) {
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return "", err
	}
	msg, err := w.newInput(ctx, rt, s, opts)
	if err != nil {
		return "", err
	}
	if err := rt.Client().Publish(ctx, msg); err != nil {
		return "", fmt.Errorf("workflow %s: start run: %w", w.name, err)
	}
	return msg.Metadata.RunID, nil
}

// Run runs the workflow on state s and returns the final state. The run is
// carried out by the handlers of whichever processes serve the workflow,
// this one included if it called Serve; Run waits for its output by
// correlation id. A run that fails or is cancelled gives an
// *agent.RunError of Kind "workflow"; a run that
// interrupts gives an *InterruptError (matching ErrInterrupted) with the
// run id, to answer with [Workflow.Answer] and wait for with
// [Workflow.Wait]. When ctx ends first Run returns ctx's error, and the
// run goes on. When a message of the run, or of an agent run it started,
// is parked on the dead-letter channel, Run returns at once an
// *agent.RunError matching agent.ErrRunParked; the run waits for the dead
// letter's replay.
func (w *Workflow[S]) Run(ctx context.Context, rt *agent.Runtime, s S, opts *RunOptions) (S, error) {
	var zero S
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return zero, err
	}
	msg, err := w.newInput(ctx, rt, s, opts)
	if err != nil {
		return zero, err
	}
	id := msg.Metadata.RunID
	f, err := w.follow(ctx, rt, OutputChannel(w.name), id)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	if opts != nil && opts.RunID != "" {
		// A run id given again: a run that has ended or waits answers
		// from the store (a broker that drops messages with a repeated id
		// would drop its output emitted again).
		if st, err := w.loadRunState(ctx, rt, id); err == nil && (st.Status.Terminal() || st.Status == RunInterrupted) {
			return w.stored(st)
		}
	}
	if err := rt.Client().Publish(ctx, msg); err != nil {
		return zero, fmt.Errorf("workflow %s: start run: %w", w.name, err)
	}
	return w.await(ctx, f)
}

// Wait waits for the next output of a run: its end, or its next
// interrupt. A run that has ended, or is interrupted, answers at once from
// the store (after [Workflow.Answer] a run is no longer interrupted). A
// run held up by a parked message answers at once with an
// *agent.RunError matching agent.ErrRunParked, whether the message was
// parked while Wait waits or before (if a dead-letter recorder,
// deadletter.Serve, recorded it). Wait hears of the run's end from the
// workflow's output channel and reads it from the store, which it also
// reads again now and then while it hears nothing. A run id of which no
// run is recorded within agent.DefaultStartTimeout (its input may be on
// its way: Submit returns before a worker takes it) returns an error
// matching [store.ErrNotFound]. When ctx ends first, Wait returns an
// error matching ctx's cause, and the run goes on.
func (w *Workflow[S]) Wait(ctx context.Context, rt *agent.Runtime, runID string) (S, error) {
	var zero S
	if rt == nil {
		return zero, fmt.Errorf("workflow %s: wait: %w", w.name, agent.ErrNoRuntime)
	}
	f, err := w.follow(ctx, rt, OutputChannel(w.name), runID)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	st, err := w.loadRunState(ctx, rt, runID)
	if err == nil && (st.Status.Terminal() || st.Status == RunInterrupted) {
		return w.stored(st)
	}
	// A message of the run parked before Wait began to follow the
	// dead-letter channel: known if a recorder recorded it.
	if recs, err := deadletter.OfRun(ctx, rt.Store(), runID); err == nil {
		for _, rec := range recs {
			if perr := agent.ParkedError(rec.Letter(), w.ref(runID)); perr != nil {
				return zero, perr
			}
		}
	}
	wait := runlife.Wait{
		What:         fmt.Sprintf("workflow %s: wait for run %s", w.name, runID),
		Follower:     f,
		StartTimeout: agent.DefaultStartTimeout,
		Queued:       func(ctx context.Context) (bool, error) { return flow.Queued(ctx, rt.Store(), runID) },
		Load: func(ctx context.Context) (bool, error) {
			st, err = w.loadRunState(ctx, rt, runID)
			return err == nil && (st.Status.Terminal() || st.Status == RunInterrupted), err
		},
		Parked: func(m *calf.Message) error { return agent.ParkedError(m, w.ref(runID)) },
	}
	if err := wait.Run(ctx); err != nil {
		return zero, err
	}
	return w.stored(st)
}

// stored returns the result of a run that has ended or is interrupted,
// from its stored state.
func (w *Workflow[S]) stored(st *runState) (S, error) {
	return w.result(&OutputEvent{Status: outputStatus(st.Status), State: st.State, Error: st.Error, ErrorKind: st.ErrorKind,
		Interrupt: st.Interrupt, RunID: st.RunID})
}

func outputStatus(s RunStatus) string {
	switch s {
	case RunComplete:
		return OutputComplete
	case RunCancelled:
		return OutputCancelled
	case RunInterrupted:
		return OutputInterrupted
	}
	return OutputFailed
}

// follow follows pattern for the run id, and the dead letters of the run
// and of the runs it starts.
func (w *Workflow[S]) follow(ctx context.Context, rt *agent.Runtime, pattern, id string) (*calf.Follower, error) {
	return runlife.Follow(ctx, rt.Client(), pattern, id)
}

func (w *Workflow[S]) await(ctx context.Context, f *calf.Follower) (S, error) {
	var zero S
	var m *calf.Message
	for m == nil {
		var err error
		if m, err = f.Next(ctx); err != nil {
			return zero, fmt.Errorf("workflow %s: %w", w.name, err)
		}
		if m.Channel == calf.DeadLetterChannel {
			if err := agent.ParkedError(m, w.ref(f.ID())); err != nil {
				return zero, err
			}
			m = nil
		}
	}
	var ev OutputEvent
	if err := m.Decode(&ev); err != nil {
		return zero, err
	}
	return w.result(&ev)
}

// DecodeOutput returns the final state an [OutputEvent] carries, such as
// the last event [Workflow.RunStream] yields: an *agent.RunError for a
// run that failed or was cancelled, an *InterruptError for one that is
// suspended.
func (w *Workflow[S]) DecodeOutput(ev *OutputEvent) (S, error) { return w.result(ev) }

// runError returns the *agent.RunError of a run that failed or was
// cancelled, which ev reports.
func (w *Workflow[S]) runError(ev *OutputEvent) *agent.RunError {
	re := &agent.RunError{RunRef: w.ref(ev.RunID), Status: agent.RunFailed, Reason: ev.Error}
	if ev.Status == OutputCancelled {
		re.Status = agent.RunCancelled
	}
	switch ev.ErrorKind {
	case ErrorKindLimit:
		re.Err = ErrLimit
	case ErrorKindNotServed:
		re.Err = agent.ErrNotServed
	}
	return re
}

// ref names the run id of w.
func (w *Workflow[S]) ref(runID string) agent.RunRef {
	return agent.RunRef{Kind: "workflow", Name: w.name, RunID: runID}
}

func (w *Workflow[S]) result(ev *OutputEvent) (S, error) {
	var s S
	switch ev.Status {
	case OutputComplete:
		if err := json.Unmarshal(ev.State, &s); err != nil {
			return s, fmt.Errorf("workflow %s: run %s: decode state: %w", w.name, ev.RunID, err)
		}
		return s, nil
	case OutputInterrupted:
		ie := &InterruptError{RunID: ev.RunID, Info: ev.Interrupt}
		if ev.Interrupt != nil {
			ie.Reason = ev.Interrupt.Reason
		}
		return s, ie
	default:
		return s, w.runError(ev)
	}
}

// Cancel ends a run that has not ended, running or interrupted, with
// status cancelled and reason, and emits its output. Events of the run
// that arrive later are dropped; a function node in progress finishes but
// its result is not recorded. The child runs in progress (of agent nodes
// and sub-workflows) are cancelled too: their model call or tool in
// progress finishes, but they take no step after it; a sub-workflow run
// whose input is still on its way never starts. Cancelling an ended run
// changes nothing; a run not recorded yet (its input may be on its way:
// Submit returns before a worker takes it) is recorded cancelled, so that
// it never starts, as an agent's or a team's.
func (w *Workflow[S]) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	if rt == nil {
		return fmt.Errorf("workflow %s: cancel: %w", w.name, agent.ErrNoRuntime)
	}
	return w.cancel(ctx, rt, runID, reason, true)
}

// cancel is Cancel. With unstarted set, a run whose input has not been
// handled yet is recorded cancelled, so that it never starts: that is how
// a parent cancels a sub-workflow run it has submitted, whose input may
// still be on its way.
func (w *Workflow[S]) cancel(ctx context.Context, rt *agent.Runtime, runID, reason string, unstarted bool) error {
	h := &handlers[S]{w: w, rt: rt}
	now := rt.Client().Now()
	var children []string // the nodes whose child runs are in progress
	var step int
	st, changed, err := h.commit(ctx, runID, func(st *runState) bool {
		children, step = nil, st.Step
		if st.Status.Terminal() {
			return false
		}
		if !st.Paused() { // a paused step has started nothing
			children = w.childNodes(st)
		}
		st.failed(reason, "", now)
		st.Status = RunCancelled
		return true
	})
	if errors.Is(err, store.ErrNotFound) && unstarted {
		created, cerr := h.createCancelled(ctx, runID, reason, now)
		if cerr != nil || created {
			return cerr
		}
		// The input was handled meanwhile: cancel the run it started.
		return w.cancel(ctx, rt, runID, reason, false)
	}
	if err != nil || !changed {
		return err
	}
	for _, node := range children {
		child := childRunID(runID, step, node)
		why := fmt.Sprintf("workflow %s: run %s was cancelled: %s", w.name, runID, reason)
		if err := w.nodes[node].agent.cancel(ctx, rt, child, why); err != nil {
			rt.Client().Logger().Warn("workflow: cancel child run", "workflow", w.name, "run", runID, "node", node, "child", child, "err", err)
		}
	}
	return h.emitPending(ctx, st)
}

// childNodes returns the nodes of the run's current step that run a child
// run (agent nodes and sub-workflows) and have not finished.
func (w *Workflow[S]) childNodes(st *runState) []string {
	nodes := []string{st.Node}
	if f := w.fanOuts[st.FanOut]; st.FanOut != "" && f != nil {
		nodes = f.branches
	}
	var out []string
	for _, n := range nodes {
		if node, ok := w.nodes[n]; ok && node.agent != nil && st.Branches[n] == nil {
			out = append(out, n)
		}
	}
	return out
}

// Answer answers a run's interrupt with input (any JSON-encodable value,
// which the interrupted node reads with [ResumeInput]). It records the
// input in the run's state, so that from then on the run is running (and
// a crash loses nothing: [Workflow.Recover] continues it), then sends it
// as the run's signal calf.interrupt.{n} (n: [InterruptInfo].N), which
// wakes the run, and returns; the interrupted node runs again on whichever
// worker handles the wake (the run's resume event). From a process whose
// broker reaches no other (an in-process broker over a shared SQLite
// file), the signal is found in the store by the process that serves the
// run, which resumes it within a second or so. Follow with
// [Workflow.Wait] for the run's next output. Answering a run that is not
// interrupted is an error. The signal cannot be sent by name: names that
// begin with "calf." are Calf's own.
//
// Answer is not Resume: an interrupt is a node's own question, answered
// with input; a pause ([Workflow.Pause]) is a caller's, between steps, and
// [Workflow.Resume] ends it.
func (w *Workflow[S]) Answer(ctx context.Context, rt *agent.Runtime, runID string, input any) error {
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return err
	}
	data, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("workflow %s: answer run %s: encode input: %w", w.name, runID, err)
	}
	h := &handlers[S]{w: w, rt: rt}
	var status RunStatus
	st, changed, err := h.commit(ctx, runID, func(st *runState) bool {
		status = st.Status
		if st.Status != RunInterrupted {
			return false
		}
		st.resume(st.Interrupts, data)
		return true
	})
	if err != nil {
		return err
	}
	if !changed {
		return fmt.Errorf("workflow %s: answer run %s: it is %s, not interrupted", w.name, runID, status)
	}
	// The answer is the interrupt's signal: delivered, it wakes the run's
	// wait, whose wake is the resume event.
	n := st.Resumed
	woke, err := signals.Answer(ctx, signalEnv(rt), signalKey(w.name, runID), interruptSignal(n), signals.NewSeq(rt.Client().Now()), data)
	if err != nil {
		return fmt.Errorf("workflow %s: answer run %s: %w", w.name, runID, err)
	}
	if woke {
		return nil
	}
	// No wait for it: a run interrupted by a version that recorded none
	// (or whose wait is not recorded yet, which then takes the signal).
	_, err = rt.Client().Emit(ctx, ResumeChannel(w.name), ResumeEvent{Interrupt: n, Input: data},
		calf.WithID(resumeID(runID, n)), calf.WithKey(runID),
		calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID}))
	if err != nil {
		return fmt.Errorf("workflow %s: answer run %s: %w", w.name, runID, err)
	}
	return nil
}

// ForkOptions configures [Workflow.Fork]. A nil *ForkOptions means the
// defaults.
type ForkOptions struct {
	// RunID names the new run. Default: a fresh id.
	RunID string
}

// Fork starts a new run that continues run runID from its checkpoint seq
// (see [Workflow.Checkpoints]) and returns the new run's id. state, when
// not nil, replaces the checkpoint's state in the new run. The new run is
// independent: its steps, checkpoints and output are its own, and the old
// run is untouched.
func (w *Workflow[S]) Fork(ctx context.Context, rt *agent.Runtime, runID string, seq int, state *S, opts *ForkOptions) (string, error) {
	rt, err := w.onDemand(ctx, rt)
	if err != nil {
		return "", err
	}
	if _, err := w.loadCheckpoint(ctx, rt, runID, seq); err != nil {
		return "", err
	}
	var o ForkOptions
	if opts != nil {
		o = *opts
	}
	ev := &InputEvent{From: &ForkFrom{Run: runID, Seq: seq}}
	if state != nil {
		data, err := json.Marshal(*state)
		if err != nil {
			return "", fmt.Errorf("workflow %s: fork: encode state: %w", w.name, err)
		}
		ev.State = data
	}
	msg, err := w.input(ctx, rt, ev, o.RunID)
	if err != nil {
		return "", err
	}
	if err := rt.Client().Publish(ctx, msg); err != nil {
		return "", fmt.Errorf("workflow %s: fork run %s: %w", w.name, runID, err)
	}
	return msg.Metadata.RunID, nil
}

// EventKind is the kind of an [Event].
type EventKind string

// Event kinds, one per workflow channel.
const (
	EventInput    EventKind = "input"
	EventStep     EventKind = "step"
	EventReply    EventKind = "reply"
	EventResume   EventKind = "resume"
	EventNodeDone EventKind = "node_done"
	EventOutput   EventKind = "output"
	// EventPause is a pause of the run taking effect, or its resume.
	EventPause EventKind = "pause"
	// EventCancel is a request to cancel the run (a cancel by name, [Kind]); the
	// output that follows says that it ended.
	EventCancel EventKind = "cancel"
)

// Event is one event of a run, as [Workflow.RunStream] yields it.
type Event struct {
	Kind  EventKind
	RunID string
	// Step and Node say which step and node the event belongs to (0 and
	// "" for input and output).
	Step int
	Node string
	// NodeDone is set for EventNodeDone, Reply (the output of an agent
	// node's run) for EventReply, Output for EventOutput, Pause for
	// EventPause.
	NodeDone *NodeDoneEvent
	Reply    *agent.OutputEvent
	Output   *OutputEvent
	Pause    *agent.PauseEvent
	// Message is the event as it travelled on the broker.
	Message *calf.Message
}

// RunStream starts a run like [Workflow.Run] and yields its events as they
// happen: the input, each step (tagged with its node and step number), the
// replies of agent nodes, each node's completion with the state it left,
// its pauses and resumes, and last the output. A run that fails or is cancelled yields its output
// event and then an *agent.RunError; a run that interrupts yields its output event (status
// "interrupted") and stops. Each event is yielded once, even if the
// broker delivers it twice.
func (w *Workflow[S]) RunStream(ctx context.Context, rt *agent.Runtime, s S, opts *RunOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		rt, err := w.onDemand(ctx, rt)
		if err != nil {
			yield(Event{}, err)
			return
		}
		msg, err := w.newInput(ctx, rt, s, opts)
		if err != nil {
			yield(Event{}, err)
			return
		}
		id := msg.Metadata.RunID
		f, err := w.follow(ctx, rt, AllChannels(w.name), id)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer f.Close()
		if err := rt.Client().Publish(ctx, msg); err != nil {
			yield(Event{}, fmt.Errorf("workflow %s: start run: %w", w.name, err))
			return
		}
		seen := map[string]bool{}
		for {
			m, err := f.Next(ctx)
			if err != nil {
				yield(Event{}, fmt.Errorf("workflow %s: %w", w.name, err))
				return
			}
			if m.Channel == calf.DeadLetterChannel {
				if err := agent.ParkedError(m, w.ref(id)); err != nil {
					yield(Event{}, err)
					return
				}
				continue
			}
			if seen[m.ID] {
				continue
			}
			seen[m.ID] = true
			ev, err := w.event(m)
			if err != nil {
				rt.Client().Logger().Warn("workflow: undecodable event in stream", "workflow", w.name, "run", id, "err", err)
				continue
			}
			if !yield(ev, nil) {
				return
			}
			if ev.Kind == EventOutput {
				if ev.Output.Status == OutputFailed || ev.Output.Status == OutputCancelled {
					_, err := w.result(ev.Output)
					yield(Event{}, err)
				}
				return
			}
		}
	}
}

func (w *Workflow[S]) event(m *calf.Message) (Event, error) {
	ev := Event{RunID: m.Metadata.CorrelationID, Message: m}
	kind := strings.TrimPrefix(m.Channel, channelPrefix+w.name+".")
	var err error
	switch kind {
	case suffixInput:
		ev.Kind = EventInput
	case suffixStep:
		var p StepEvent
		err = m.Decode(&p)
		ev.Kind, ev.Step, ev.Node = EventStep, p.Step, p.Node
	case suffixReply:
		ev.Kind, ev.Reply = EventReply, new(agent.OutputEvent)
		if err = m.Decode(ev.Reply); err == nil {
			ev.Step, ev.Node, err = parseRef(ev.Reply.Ref)
		}
	case suffixResume:
		ev.Kind = EventResume
	case suffixNodeDone:
		ev.Kind, ev.NodeDone = EventNodeDone, new(NodeDoneEvent)
		err = m.Decode(ev.NodeDone)
		ev.Step, ev.Node = ev.NodeDone.Step, ev.NodeDone.Node
	case suffixOutput:
		ev.Kind, ev.Output = EventOutput, new(OutputEvent)
		err = m.Decode(ev.Output)
	case suffixPause:
		ev.Kind, ev.Pause = EventPause, new(agent.PauseEvent)
		err = m.Decode(ev.Pause)
		ev.Step = ev.Pause.Step
	case suffixCancel:
		ev.Kind = EventCancel
	default:
		err = fmt.Errorf("workflow: unknown channel %s", m.Channel)
	}
	return ev, err
}
