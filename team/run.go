package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// RunOptions configures one team run, or a member's run that a team
// starts ([Member.Submit]). A nil *RunOptions means the defaults.
type RunOptions struct {
	// RunID names the run. Default: a fresh id. Submitting the same run id
	// again starts nothing new: once the first run has ended, the caller
	// gets its output.
	RunID string
	// IdempotencyKey, when set, is the caller's key for this request: the
	// same prompt under the same key, within the runtime's
	// [agent.RuntimeOptions.IdempotencyWindow], gets the run the first
	// request started and its answer, not a second run; another request
	// under a key in use is refused with an error matching
	// [agent.ErrIdempotencyConflict]. The key is the team's.
	IdempotencyKey string
	// SessionID is carried on the run's events (an agent member's run
	// continues the session).
	SessionID string
	// ReplyTo, for [Team.Submit], names where the run's output goes when
	// it ends. Run and RunStream set their own.
	ReplyTo *agent.ReplyTo
	// Parent is the id of the run that starts this one, if any.
	Parent string
	// Stream, for [Team.Submit], has the members' agents publish their
	// model deltas, as RunStream's runs do, for observers of the run's
	// events. Run does not stream; RunStream always does.
	Stream bool
	// Deadline, when set, ends the run when it passes: a team's run
	// wherever it is (a member running, waiting, paused, a slot under
	// flow control), cancelled by a durable timer with the reason "timed
	// out: ..." (see [agent.Runtime.StartDeadline]); an agent member's
	// run as [agent.RunOptions.Deadline] says. A team sets it on the runs
	// of its members from its Options.MemberTimeout.
	Deadline time.Time
	// Budget, when set, bounds what the run spends: the model calls of
	// every run it starts, of any kind. Each member run gets what is left
	// of it once the member runs that have answered are counted
	// ([agent.Budget.Remaining]), in place of its agent's own budget;
	// members that run at once (a concurrent step) each get all of that,
	// so together they may pass it by up to their number of calls. A member
	// run that would pass its part pauses (or fails, with Fail), as an
	// agent's run does; [agent.Runtime.SetBudget] with the team run's
	// [agent.RunRef] changes the budget, and the parts of the member runs
	// in flight (see [Kind]).
	Budget *agent.Budget
}

// Output is the result of a completed team run.
type Output struct {
	// Output is the team's answer.
	Output string
	RunID  string
	// Transcript holds every member run of the team run, in order.
	Transcript []Turn
	// Usage adds up the members' usage, and Cost their cost (see
	// [agent.Output.Cost]): their subagents' and nested teams' included.
	Usage model.Usage
	Cost  model.Cost
	// Steps is the number of steps (batches of member runs) taken.
	Steps int
	// Duration is the time from the run's start to its end.
	Duration time.Duration
}

var _ Member = (*Team)(nil)

// Submit starts a team run with prompt as its task without waiting for
// it, and returns its id: it publishes the run's input event (id
// "{run}.input", key the run id), and when the run ends its
// [agent.OutputEvent] goes to the team's output channel and to
// opts.ReplyTo, if set. [Team.Wait] waits for its end, in any process. It
// makes a team a [Member] of another team. Submitting a run id again
// starts nothing new: a run that has ended answers again.
func (t *Team) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (string, error) {
	rt, err := t.onDemand(ctx, rt)
	if err != nil {
		return "", err
	}
	o := options(opts)
	msg, err := t.input(ctx, rt, prompt, &o)
	if err != nil {
		return "", err
	}
	if err := rt.Client().Publish(ctx, msg); err != nil {
		return "", fmt.Errorf("team %s: submit run %s: %w", t.name, o.RunID, err)
	}
	return o.RunID, nil
}

// input builds the input message of the run o names (o.RunID is set).
func (t *Team) input(ctx context.Context, rt *agent.Runtime, prompt string, o *RunOptions) (*calf.Message, error) {
	in := InputEvent{Content: prompt, ReplyTo: o.ReplyTo, Parent: o.Parent, Stream: o.Stream, Deadline: o.Deadline}
	if b := o.Budget; b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("team %s: RunOptions.Budget: %w", t.name, err)
		}
		in.Budget = b
	}
	if o.IdempotencyKey != "" {
		// The request is what the caller asked: not where the answer
		// goes, nor whether it streams.
		req := in
		req.ReplyTo, req.Stream = nil, false
		id, err := rt.RunForKey(ctx, "team/"+t.name, o.IdempotencyKey, struct {
			In      InputEvent `json:"in"`
			Session string     `json:"session,omitempty"`
		}{req, o.SessionID}, o.RunID)
		if err != nil {
			return nil, fmt.Errorf("team %s: %w", t.name, err)
		}
		if in.ReplyTo != nil && in.ReplyTo.Key == o.RunID {
			r := *in.ReplyTo
			r.Key = id
			in.ReplyTo = &r
		}
		o.RunID = id
	}
	msg, err := rt.Client().NewMessage(ctx, InputChannel(t.name), in, calf.WithID(inputID(o.RunID)), calf.WithKey(o.RunID),
		calf.WithMetadata(calf.Metadata{CorrelationID: o.RunID, RunID: o.RunID}))
	if err != nil {
		return nil, err
	}
	msg.Metadata.SessionID = o.SessionID
	return msg, nil
}

// DecodeOutput returns the team's output as text, or the *agent.RunError
// (of Kind "team") of a run that did not complete.
func (t *Team) DecodeOutput(ev *agent.OutputEvent) (string, error) {
	if err := outputError("team", t.name, ev); err != nil {
		return "", withKind(err)
	}
	return contentText(ev.Content), nil
}

// ref names the run id of t.
func (t *Team) ref(runID string) agent.RunRef {
	return agent.RunRef{Kind: "team", Name: t.name, RunID: runID}
}

// withKind makes the error of a run failed by an unknown member match
// ErrUnknownMember, and that of a run failed by a member no process
// serves match agent.ErrNotServed.
func withKind(err error) error {
	var re *agent.RunError
	switch {
	case !errors.As(err, &re) || re.Err != nil:
	case strings.Contains(re.Reason, ErrUnknownMember.Error()):
		re.Err = ErrUnknownMember
	case strings.Contains(re.Reason, agent.ErrNotServed.Error()):
		// A member (or a member's member) no process serves.
		re.Err = agent.ErrNotServed
	}
	return err
}

// Run starts a team run with prompt as its task and waits for its output.
// The run is carried out by the coordinators of whichever processes serve
// the team, and the members by whichever serve them. When ctx ends or the
// team's Timeout passes first, the run is cancelled and Run returns an
// *agent.RunError matching agent.ErrRunCancelled. A run that fails returns
// an *agent.RunError matching agent.ErrRunFailed (and [ErrUnknownMember]
// when a moderator picked a speaker that is not a member, agent.ErrNotServed
// when no process serves a member's agent). Its Kind is
// "team", and its reason names the participant that failed, its kind and
// its run, then that run's own reason, nested teams included:
//
//	team press: run r1 failed: member drafting (team drafting, run r1.1.drafting) failed:
//	member writer (agent writer, run r1.1.drafting.1.writer) failed: model call failed: no ink
//
// The reason is recorded in the run's state and output event, so
// [Team.Wait] and observers in other processes read the same. When a message
// of the run or of a member run is parked on the dead-letter channel, Run
// returns at once an *agent.RunError matching agent.ErrRunParked, and the
// run waits for the dead letter's replay. RunStream ends the same way.
func (t *Team) Run(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (*Output, error) {
	rt, err := t.onDemand(ctx, rt)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, t.opts.Timeout, fmt.Errorf("team %s: run timed out after %s: %w", t.name, t.opts.Timeout, context.DeadlineExceeded))
	defer cancel()
	o := options(opts)
	o.Stream = false
	// The output comes back on this client's inbox.
	o.ReplyTo = &agent.ReplyTo{Channel: rt.Client().Inbox(), Key: o.RunID}
	msg, err := t.input(ctx, rt, prompt, &o)
	if err != nil {
		return nil, err
	}
	f, err := rt.Client().Follow(ctx, rt.Client().Inbox(), o.RunID)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The dead letters of the run, and of its member runs.
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		return nil, err
	}
	if err := rt.Client().Publish(ctx, msg); err != nil {
		return nil, fmt.Errorf("team %s: start run: %w", t.name, err)
	}
	var m *calf.Message
	for m == nil {
		if m, err = f.Next(ctx); err != nil {
			return nil, t.abandon(ctx, rt, o.RunID)
		}
		if m.Channel == calf.DeadLetterChannel {
			if err := agent.ParkedError(m, t.ref(o.RunID)); err != nil {
				return nil, err
			}
			m = nil
		}
	}
	var ev agent.OutputEvent
	if err := m.Decode(&ev); err != nil {
		return nil, err
	}
	if _, err := t.DecodeOutput(&ev); err != nil {
		return nil, err
	}
	return t.stored(ctx, rt, o.RunID)
}

// stored returns the output of a finished team run, read from the store:
// an *agent.RunError for a run that failed or was cancelled, an error for
// a run still in progress, and an error matching store.ErrNotFound for an
// unknown run.
func (t *Team) stored(ctx context.Context, rt *agent.Runtime, runID string) (*Output, error) {
	st, err := loadRunState(ctx, rt, runID)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case agent.RunComplete:
	case agent.RunRunning:
		return nil, fmt.Errorf("team %s: run %s is still running", t.name, runID)
	default:
		return nil, withKind(&agent.RunError{RunRef: t.ref(runID), Status: st.Status, Reason: st.Error})
	}
	return &Output{Output: st.Output, RunID: runID, Transcript: st.Transcript, Usage: st.Usage, Cost: st.Cost, Steps: st.Step, Duration: st.EndedAt.Sub(st.StartedAt)}, nil
}

// Cancel ends a running team run with status cancelled and emits its
// output. The member runs in flight are cancelled too, for the members
// that are [Canceller]s (all but custom members); the others carry on, and
// their replies are ignored. Cancelling a run that has ended changes
// nothing.
func (t *Team) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	if rt == nil {
		return fmt.Errorf("team %s: cancel: %w", t.name, agent.ErrNoRuntime)
	}
	return cancelRun(ctx, rt, runID, reason, &runState{RunID: runID, Team: t.name, Process: t.process}, func(c memberCall) error {
		m, ok := t.byName[c.Member].(Canceller)
		if !ok {
			return nil
		}
		return m.Cancel(ctx, rt, c.RunID, fmt.Sprintf("team %s: run %s was cancelled: %s", t.name, runID, reason))
	})
}

// cancelRun ends the team run runID cancelled (creating it so, from
// placeholder, when it has not started and placeholder is not nil), calls
// cancelCall for each member run in flight, and emits the run's output.
func cancelRun(ctx context.Context, rt *agent.Runtime, runID, reason string, placeholder *runState, cancelCall func(memberCall) error) error {
	now := rt.Client().Now()
	var inFlight []memberCall
	var team string
	_, err := store.Update(ctx, rt.Store(), store.KindTeam, runID, func(data []byte, exists bool) ([]byte, error) {
		inFlight = nil
		if !exists {
			if placeholder == nil {
				return nil, fmt.Errorf("team: run %s: %w", runID, store.ErrNotFound)
			}
			// Not started yet: the input handler will find the run ended.
			st := *placeholder
			st.Status, st.Error, st.StartedAt, st.EndedAt = agent.RunCancelled, reason, now, now
			return json.Marshal(&st)
		}
		st, err := decodeRunState(data)
		if err != nil || st.Status.Terminal() {
			return nil, err
		}
		team = st.Team
		// A call not yet marked submitted may be on its way: cancelling
		// its run first makes it end as soon as it starts.
		for _, c := range st.Calls {
			if !c.Done {
				inFlight = append(inFlight, c)
			}
		}
		st.Status, st.Error, st.Calls, st.EndedAt = agent.RunCancelled, reason, nil, now
		return json.Marshal(st)
	})
	if err != nil {
		return err
	}
	for _, c := range inFlight {
		if err := cancelCall(c); err != nil && !errors.Is(err, store.ErrNotFound) { // a workflow run not started yet
			rt.Client().Logger().Warn("team: cancel member run", "team", team, "run", runID, "member", c.Member, "member_run", c.RunID, "err", err)
		}
	}
	st, err := loadRunState(ctx, rt, runID)
	if err != nil {
		return err
	}
	if st.Status != agent.RunCancelled {
		return nil
	}
	return emitOutput(ctx, rt, st)
}

// abandon cancels a run whose caller stopped waiting, and reports it.
func (t *Team) abandon(ctx context.Context, rt *agent.Runtime, id string) error {
	cause := context.Cause(ctx)
	reason := "the caller stopped waiting: " + cause.Error()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := t.Cancel(bg, rt, id, reason); err != nil {
		rt.Client().Logger().Warn("team: cancel abandoned run", "team", t.name, "run", id, "err", err)
	}
	if st, err := loadRunState(bg, rt, id); err == nil && st.Status != agent.RunCancelled {
		reason = fmt.Sprintf("the run ended (%s) but the caller stopped waiting: %v", st.Status, cause)
	}
	return &agent.RunError{RunRef: t.ref(id), Status: agent.RunCancelled, Reason: reason, Err: cause}
}

// EventKind is the kind of an [Event].
type EventKind string

// Event kinds.
const (
	// EventInput: the team run started (or a nested team's run did).
	EventInput EventKind = "input"
	// EventStep: a step's member runs are being started.
	EventStep EventKind = "step"
	// EventMember: an event of a member's agent run; Agent holds it.
	EventMember EventKind = "member"
	// EventMemberDone: a member run ended; Output holds its output.
	EventMemberDone EventKind = "member_done"
	// EventOutput: the team run ended; Output holds its output. It is the
	// last event of a stream.
	EventOutput EventKind = "output"
	// EventPause: the team run paused before the member runs of Step, or
	// was resumed; Pause holds it. See [Team.Pause].
	EventPause EventKind = "pause"
)

// Event is one event of a team run, as [Team.RunStream] yields it.
type Event struct {
	Kind EventKind
	// Team and RunID name the team run being streamed.
	Team  string
	RunID string
	// Step is the team step the event belongs to (0 for the input and the
	// output), and Member the member whose run it belongs to, if any. For
	// the events of a nested team or of an agent's subagents, Member is
	// the top-level member that started them.
	Step   int
	Member string
	// Agent is the member's agent event, for EventMember: its Agent field
	// names the agent, its RunID the agent's run. For the events of a
	// nested team or of a workflow, Agent names the team or the workflow,
	// Kind is empty and Message holds the event.
	Agent *agent.Event
	// Output is the output of a member run (EventMemberDone) or of the
	// team run (EventOutput).
	Output *agent.OutputEvent
	// Pause is a pause or a resume of the team run (EventPause).
	Pause *agent.PauseEvent
	// Message is the event as it travelled on the broker.
	Message *calf.Message
}

// RunStream starts a team run like [Team.Run] and yields its events as
// they happen: the team's steps, every event of its members' runs (the
// model's deltas included) tagged with the member and the step, each
// member's end, and last the team's output. A run that fails yields its
// output event and then an *agent.RunError. Stopping the iteration before
// the output cancels the run. Use [Team.Wait] with the run id for the
// transcript.
//
// The stream observes the agent, team and workflow channels of the broker
// in private subscriptions and keeps the events of this run and of the runs it
// started (by run id and by parent): it is meant for interactive use, not
// for many concurrent runs. Events of different runs may interleave in
// any order that respects each run's own order.
//
// A tool call of a member (or of a member's subagent, or of a run a
// member handed off to) that waits for a person's approval shows as a
// member event of kind [agent.EventApproval], once when requested and once
// when answered. Answer it with
// [github.com/calf-go/calf/agent/approval.Respond] from any process;
// [github.com/calf-go/calf/agent/approval.List] with the team run's id lists
// every request of the run's members.
func (t *Team) RunStream(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithTimeoutCause(ctx, t.opts.Timeout, fmt.Errorf("team %s: run timed out after %s: %w", t.name, t.opts.Timeout, context.DeadlineExceeded))
		defer cancel()
		rt, err := t.onDemand(ctx, rt)
		if err != nil {
			yield(Event{}, err)
			return
		}
		ro := options(opts)
		ro.Stream = true
		msg, err := t.input(ctx, rt, prompt, &ro)
		if err != nil {
			yield(Event{}, err)
			return
		}
		id := ro.RunID
		w := newWatcher(id)
		for _, p := range []string{"calf.agent.>", "calf.team.>", "calf.workflow.>", calf.DeadLetterChannel} {
			sub, err := rt.Client().Broker().Subscribe(context.WithoutCancel(ctx), p, w.deliver, nil)
			if err != nil {
				yield(Event{}, err)
				return
			}
			defer sub.Close()
		}
		if err := rt.Client().Publish(ctx, msg); err != nil {
			yield(Event{}, fmt.Errorf("team %s: start run: %w", t.name, err))
			return
		}
		// The output of a completed run comes last, after every member's.
		o := newCausalOrder(inputID(id), func(m *calf.Message) bool {
			if m.Channel != OutputChannel(t.name) || m.Metadata.RunID != id {
				return false
			}
			var out agent.OutputEvent
			return m.Decode(&out) == nil && out.Status == agent.OutputComplete
		})
		for {
			// Once the run's output is in, the events still held get a
			// moment to be joined by their causes.
			nctx, stop := ctx, context.CancelFunc(func() {})
			if o.lastHeld() {
				nctx, stop = context.WithTimeout(ctx, lastGrace)
			}
			m, err := w.next(nctx)
			stop()
			var ready []*calf.Message
			switch {
			case err != nil && ctx.Err() == nil && nctx.Err() != nil:
				ready = o.flush()
			case err != nil:
				yield(Event{}, t.abandon(ctx, rt, id))
				return
			case m.Channel == calf.DeadLetterChannel:
				if err := agent.ParkedError(m, t.ref(id)); err != nil {
					yield(Event{}, err)
					return
				}
				continue
			default:
				ready = o.add(m)
			}
			for _, m := range ready {
				ev, ok := t.event(id, m, w.at(m.Metadata.RunID))
				if !ok {
					continue
				}
				if !yield(ev, nil) {
					if ev.Kind != EventOutput {
						cancel()
						_ = t.abandon(ctx, rt, id)
					}
					return
				}
				if ev.Kind == EventOutput {
					if _, err := t.DecodeOutput(ev.Output); err != nil {
						yield(Event{}, err)
					}
					return
				}
			}
		}
	}
}

// causalOrder restores causal order in a stream that gathers events of
// many keys, which a broker delivers in parallel: it holds an event until
// the event that caused it has been released, and the reply of a child
// run (a member's, a subagent's) until that run's output has been
// released. Copies of a released event
// (same id) are dropped. An agent's tool call and output, which count the
// stream deltas of their step, wait for those deltas: they share the
// inference that caused them, and travel under other keys or channels.
//
// The last event, the output of a team run that completed, waits for the
// outputs of every run whose input was released, and for the events held:
// a step can depend on several events (an inference on all the tool
// results of its step) and names only the last as its cause, so the
// events of a branch it does not name (a second subagent's, whose tool
// call travels under a key of its own) may still be on their way. Should
// a held event's cause never come, the stream releases the last event
// after lastGrace without it (flush).
type causalOrder struct {
	root      string                   // the id of the stream's input event
	last      func(*calf.Message) bool // reports the stream's last event
	forceLast bool                     // release the last event without waiting for the held ones
	released  map[string]bool          // message ids
	outputs   map[string]bool          // run ids whose output was released
	started   map[string]bool          // run ids whose input was released
	deltas    map[runStep]int          // stream deltas released, by agent run and step
	follows   map[string]deltasOf      // held message ids: the deltas they count or are
	held      []*calf.Message
}

// runStep is a step of an agent run.
type runStep struct {
	run  string
	step int
}

// deltasOf says how a message of an agent relates to the stream deltas of
// a step: it is one of them, or follows n of them.
type deltasOf struct {
	at    runStep
	delta bool
	n     int
}

func newCausalOrder(root string, last func(*calf.Message) bool) *causalOrder {
	return &causalOrder{root: root, last: last, released: map[string]bool{}, outputs: map[string]bool{}, started: map[string]bool{},
		deltas: map[runStep]int{}, follows: map[string]deltasOf{}}
}

// noteDeltas records how m relates to the stream deltas of its step.
func (o *causalOrder) noteDeltas(m *calf.Message) {
	if !strings.HasPrefix(m.Channel, "calf.agent.") {
		return
	}
	ev, err := agent.DecodeEvent(m)
	if err != nil {
		return
	}
	at := runStep{ev.RunID, ev.Step}
	switch {
	case ev.Kind == agent.EventDelta:
		o.follows[m.ID] = deltasOf{at: at, delta: true}
	case ev.Kind == agent.EventToolCall && ev.ToolCall.Deltas > 0:
		o.follows[m.ID] = deltasOf{at: at, n: ev.ToolCall.Deltas}
	case (ev.Kind == agent.EventOutput || ev.Kind == agent.EventHandoff) && ev.Output.Deltas > 0:
		o.follows[m.ID] = deltasOf{at: at, n: ev.Output.Deltas}
	}
}

func (o *causalOrder) ready(m *calf.Message) bool {
	if c := m.Metadata.CausationID; c != "" && m.ID != o.root && !o.released[c] {
		return false
	}
	if isReply(m.Channel) && !o.outputs[m.Metadata.RunID] {
		return false
	}
	if d, ok := o.follows[m.ID]; ok && !d.delta && o.deltas[d.at] < d.n {
		return false
	}
	if o.last(m) {
		for run := range o.started {
			if !o.outputs[run] && run != m.Metadata.RunID {
				return false
			}
		}
		for _, h := range o.held {
			if h != m && !o.forceLast {
				return false
			}
		}
	}
	return true
}

// lastGrace is how long the last event waits for the events held, once
// nothing else holds it.
const lastGrace = 2 * time.Second

// lastHeld reports whether the stream's last event is held.
func (o *causalOrder) lastHeld() bool {
	return slices.ContainsFunc(o.held, o.last)
}

// flush releases the last event without waiting for the events still
// held, whose causes did not come, and returns the events now ready.
func (o *causalOrder) flush() []*calf.Message {
	o.forceLast = true
	return o.add(nil)
}

// isReply reports whether channel carries the replies of child runs: a
// team's member_done, an agent's subagent_completed, a workflow's reply.
func isReply(channel string) bool {
	return strings.HasSuffix(channel, "."+suffixMemberDone) || strings.HasSuffix(channel, ".subagent_completed") ||
		(strings.HasPrefix(channel, "calf.workflow.") && strings.HasSuffix(channel, ".reply"))
}

// add takes m (when not nil) and returns the events that are now ready,
// in order.
func (o *causalOrder) add(m *calf.Message) []*calf.Message {
	if m != nil {
		if o.released[m.ID] {
			return nil
		}
		o.noteDeltas(m)
		o.held = append(o.held, m)
	}
	var out []*calf.Message
	for again := true; again; {
		again = false
		for i, h := range o.held {
			if o.released[h.ID] {
				o.held = append(o.held[:i], o.held[i+1:]...)
				again = true
				break
			}
			if o.ready(h) {
				o.held = append(o.held[:i], o.held[i+1:]...)
				o.released[h.ID] = true
				if d, ok := o.follows[h.ID]; ok {
					if d.delta {
						o.deltas[d.at]++
					}
					delete(o.follows, h.ID)
				}
				switch {
				case strings.HasSuffix(h.Channel, ".output"):
					o.outputs[h.Metadata.RunID] = true
				case strings.HasSuffix(h.Channel, ".input"):
					o.started[h.Metadata.RunID] = true
				}
				out = append(out, h)
				again = true
				break
			}
		}
	}
	return out
}

// watcher keeps the messages of one team run and of the runs it started.
type watcher struct {
	id     string
	mu     sync.Mutex
	runs   map[string]bool
	pos    map[string]runPosition
	queue  []*calf.Message
	notify chan struct{}
}

func newWatcher(id string) *watcher {
	return &watcher{id: id, runs: map[string]bool{id: true}, pos: map[string]runPosition{}, notify: make(chan struct{}, 1)}
}

func (w *watcher) deliver(_ context.Context, m *calf.Message) error {
	run := m.Metadata.RunID
	w.mu.Lock()
	keep := w.runs[run] || strings.HasPrefix(run, w.id+".")
	if !keep && strings.HasSuffix(m.Channel, ".input") {
		// A run started by one of ours (a subagent, say) names it as parent.
		if p := parentOf(m); p != "" && w.runs[p] {
			keep = true
		}
	}
	if keep {
		if !w.runs[run] {
			w.runs[run] = true
			w.pos[run] = w.position(run, m)
		}
		w.queue = append(w.queue, m)
	}
	w.mu.Unlock()
	if keep {
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
	return nil
}

func parentOf(m *calf.Message) string {
	var in struct {
		Parent string `json:"parent"`
	}
	if json.Unmarshal(m.Data, &in) != nil {
		return ""
	}
	return in.Parent
}

// position returns the step and top-level member of a run: from its id
// when the team derived it, else from its parent's. w.mu must be held.
func (w *watcher) position(run string, m *calf.Message) runPosition {
	if step, member := position(w.id, run); member != "" {
		return runPosition{step, member}
	}
	if p := parentOf(m); p != "" {
		return w.pos[p]
	}
	return runPosition{}
}

// at returns the position of a run of the stream.
func (w *watcher) at(run string) runPosition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pos[run]
}

type runPosition struct {
	step   int
	member string
}

func (w *watcher) next(ctx context.Context) (*calf.Message, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			m := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			w.mu.Unlock()
			return m, nil
		}
		w.mu.Unlock()
		select {
		case <-w.notify:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// event turns a message of the watched run into an Event; it reports false
// for messages the stream does not show (replies to the caller).
func (t *Team) event(id string, m *calf.Message, at runPosition) (Event, bool) {
	ev := Event{Team: t.name, RunID: id, Message: m, Step: at.step, Member: at.member}
	tokens := strings.Split(m.Channel, ".")
	if len(tokens) < 4 {
		return ev, false
	}
	kind, name, suffix := tokens[1], tokens[2], tokens[3]
	if kind == "team" && name == t.name && m.Metadata.RunID == id {
		switch suffix {
		case suffixInput:
			ev.Kind = EventInput
		case suffixStep:
			var p StepEvent
			if m.Decode(&p) != nil {
				return ev, false
			}
			ev.Kind, ev.Step = EventStep, p.Step
		case suffixOutput:
			ev.Kind, ev.Output = EventOutput, new(agent.OutputEvent)
			if m.Decode(ev.Output) != nil {
				return ev, false
			}
		case suffixPause:
			ev.Kind, ev.Pause = EventPause, new(agent.PauseEvent)
			if m.Decode(ev.Pause) != nil {
				return ev, false
			}
			ev.Step = ev.Pause.Step
		default:
			return ev, false
		}
		return ev, true
	}
	if kind == "team" && suffix == suffixMemberDone {
		ev.Kind, ev.Output = EventMemberDone, new(agent.OutputEvent)
		if m.Decode(ev.Output) != nil {
			return ev, false
		}
		return ev, true
	}
	if kind == "team" || kind == "workflow" {
		// A nested team's or a workflow's own events: the stream carries
		// them as they are, in Agent.Message.
		if kind == "workflow" && suffix == "reply" {
			return ev, false // the replies of the workflow's own children
		}
		ev.Kind = EventMember
		ev.Agent = &agent.Event{Agent: name, RunID: m.Metadata.RunID, Message: m}
		return ev, true
	}
	if kind != "agent" {
		return ev, false
	}
	a, err := agent.DecodeEvent(m)
	if err != nil {
		return ev, false
	}
	if a.Kind == agent.EventApproval && a.Approval.RunID != a.RunID {
		// A copy of a subagent's request for the run its caller started:
		// the stream has the original, from the subagent's own run.
		return ev, false
	}
	ev.Kind, ev.Agent = EventMember, &a
	return ev, true
}

// position returns the step and the top-level member of a run started by
// the team run id: its run id is "{id}.{step}.{member}…".
func position(id, run string) (int, string) {
	rest, ok := strings.CutPrefix(run, id+".")
	if !ok {
		return 0, ""
	}
	s, rest, _ := strings.Cut(rest, ".")
	step, err := strconv.Atoi(s)
	if err != nil {
		return 0, ""
	}
	if i := strings.IndexAny(rest, "./"); i >= 0 {
		rest = rest[:i]
	}
	return step, rest
}
