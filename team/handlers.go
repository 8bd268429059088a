package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/workflow"
)

// ServeOptions configures [Team.Serve]. A nil *ServeOptions means the
// defaults.
type ServeOptions struct {
	// Concurrency bounds how many team runs each handler works on at once.
	// Zero means the broker's default.
	Concurrency int
	// MaxAttempts bounds deliveries of a message whose handling fails on
	// infrastructure errors before it is dead-lettered. Zero means the
	// broker's default.
	MaxAttempts int
}

func permanent(err error) error { return calf.Permanent(err) }

// Serve subscribes the team's coordinator on rt: the handlers of its
// input, step and member_done channels. It does not serve the members:
// each agent member must be served ([agent.Agent.Serve]) and each team
// member served (Serve) by some worker on the same broker. Several
// processes may serve the same team; they share its work through the
// broker's consumer groups. The subscriptions last until the runtime's
// client shuts down. On a runtime that serves on demand
// ([agent.RuntimeOptions.ServeOnDemand]), Run, RunStream, Submit and
// Recover then do not serve the team again. A nil rt returns an error
// matching [agent.ErrNoRuntime].
func (t *Team) Serve(ctx context.Context, rt *agent.Runtime, opts *ServeOptions) error {
	if rt == nil {
		return fmt.Errorf("team %s: serve: %w", t.name, agent.ErrNoRuntime)
	}
	return t.served.Serve(rt, func() error { return t.serve(ctx, rt, opts) })
}

// onDemand returns rt with the team served on it in this process when rt
// serves on demand (once: not again if [Team.Serve] served it there), or
// an error matching [agent.ErrNoRuntime] when rt is nil. Its members are
// served on demand by their own runs.
func (t *Team) onDemand(ctx context.Context, rt *agent.Runtime) (*agent.Runtime, error) {
	if rt == nil {
		return nil, fmt.Errorf("team %s: %w", t.name, agent.ErrNoRuntime)
	}
	rt.AddKind(Kind, workflow.Kind) // for the runtime's controls by name
	if !rt.ServesOnDemand() {
		return rt, nil
	}
	if _, err := t.served.Once(ctx, rt, func(ctx context.Context) error { return t.serve(ctx, rt, nil) }); err != nil {
		return nil, fmt.Errorf("team %s: serve on demand: %w", t.name, err)
	}
	return rt, nil
}

// serve is Serve on rt, which is not nil.
func (t *Team) serve(ctx context.Context, rt *agent.Runtime, opts *ServeOptions) error {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	c := &coordinator{t: t, rt: rt}
	rt.AddSweeper("team", sweepRuns)
	rt.AddKind(Kind, workflow.Kind)
	rt.ServeTimers()
	input, err := rt.FlowGate(ctx, "team", t.name, t.opts.Flow, c.onInput, inputPrompt)
	if err != nil {
		return fmt.Errorf("team %s: serve: %w", t.name, err)
	}
	for _, s := range []struct {
		channel string
		h       calf.Handler
	}{
		{InputChannel(t.name), input},
		{StepChannel(t.name), c.onStep},
		{MemberDoneChannel(t.name), c.onMemberDone},
	} {
		if err := rt.Client().Handle(ctx, s.channel, s.h, &calf.SubscribeOptions{
			Group: s.channel, Concurrency: o.Concurrency, MaxAttempts: o.MaxAttempts,
		}); err != nil {
			return fmt.Errorf("team %s: serve: %w", t.name, err)
		}
	}
	return nil
}

type coordinator struct {
	t  *Team
	rt *agent.Runtime
}

func runID(msg *calf.Message) (string, error) {
	if msg.Metadata.RunID == "" {
		return "", permanent(fmt.Errorf("team: message %s on %s has no run id", msg.ID, msg.Channel))
	}
	return msg.Metadata.RunID, nil
}

// onInput creates the run's state with its first step recorded, then asks
// for that step. A run submitted again answers again if it has ended.
func (c *coordinator) onInput(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	var in InputEvent
	if err := msg.Decode(&in); err != nil {
		return permanent(err)
	}
	now := c.rt.Client().Now()
	var st *runState
	// A team run is usually new: create it without reading it first.
	_, err = store.CreateOrUpdate(ctx, c.rt.Store(), store.KindTeam, id, func(data []byte, exists bool) ([]byte, error) {
		if exists {
			var err error
			if st, err = decodeRunState(data); err != nil {
				return nil, err
			}
			if in.ReplyTo == nil || (st.ReplyTo != nil && *st.ReplyTo == *in.ReplyTo) {
				return nil, nil
			}
			st.ReplyTo = in.ReplyTo // submitted again by another caller: answer it
			return json.Marshal(st)
		}
		st = &runState{
			RunID: id, Team: c.t.name, Process: c.t.process, Status: agent.RunRunning, Task: in.Content,
			ReplyTo: in.ReplyTo, Parent: in.Parent, SessionID: msg.Metadata.SessionID, Stream: in.Stream,
			StartedAt: msg.Metadata.Time, Budget: in.Budget,
		}
		if err := c.t.start(ctx, st, now); err != nil {
			return nil, err
		}
		c.t.stampDeadlines(st, now)
		return json.Marshal(st)
	})
	if errors.Is(err, agent.ErrCorruptState) {
		return permanent(err)
	}
	if err != nil {
		return err
	}
	if !st.Status.Terminal() && st.Step == 1 {
		if err := c.rt.StartDeadline(ctx, c.t.ref(id), in.Deadline); err != nil {
			return err
		}
	}
	if st.Status.Terminal() || st.Step == 1 {
		return c.next(ctx, st)
	}
	return nil
}

// onStep starts the member runs of the current step that have not
// answered. Their run ids are deterministic, so starting one again starts
// nothing new.
func (c *coordinator) onStep(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	var ev StepEvent
	if err := msg.Decode(&ev); err != nil {
		return permanent(err)
	}
	rec, err := c.rt.Store().Get(ctx, store.KindTeam, id)
	if errors.Is(err, store.ErrNotFound) {
		return permanent(fmt.Errorf("team: step of unknown run %s: %w", id, err))
	}
	if err != nil {
		return err
	}
	st, err := decodeRunState(rec.Data)
	if err != nil {
		return permanent(err)
	}
	if st.Status.Terminal() || ev.Step != st.Step {
		return nil // stale: its consequences are recorded
	}
	if st.Pause != nil && !st.submitted() {
		paused, err := c.pauseTakesEffect(ctx, st)
		if err != nil || paused {
			return err
		}
		return c.onStep(ctx, msg) // resumed meanwhile: read the run again
	}
	return c.startCalls(ctx, st, false)
}

// startCalls starts the member runs of the current step that have not
// answered (and, unless all is set, were not started already), then
// records that they were.
func (c *coordinator) startCalls(ctx context.Context, st *runState, all bool) error {
	id := st.RunID
	var started []string
	for _, call := range st.Calls {
		if call.Done || (call.Submitted && !all) {
			continue
		}
		m := c.t.byName[call.Member]
		if m == nil {
			return permanent(fmt.Errorf("team %s: run %s: member %q is not in this team", c.t.name, id, call.Member))
		}
		_, err := m.Submit(ctx, c.rt, call.Prompt, &RunOptions{
			RunID: call.RunID, Parent: id, Stream: st.Stream, Deadline: call.Deadline, Budget: st.childBudget(),
			ReplyTo: &agent.ReplyTo{Channel: MemberDoneChannel(c.t.name), Key: id, CorrelationID: id, Ref: callRef(st.Step, call.Member)},
		})
		if err != nil {
			return fmt.Errorf("team %s: run %s: start %s: %w", c.t.name, id, call.Member, err)
		}
		if !call.Submitted {
			started = append(started, call.RunID)
		}
	}
	if len(started) == 0 {
		return nil
	}
	// Recorded after the fact: a crash before this write starts the runs
	// again, which starts nothing new; a duplicate step after it starts
	// nothing at all, so that duplicates do not cascade down the steps.
	_, err := update(ctx, c.rt.Store(), id, func(st *runState) (bool, error) {
		changed := false
		for _, r := range started {
			if call := st.call(r); call != nil && !call.Submitted {
				call.Submitted, changed = true, true
			}
		}
		return changed, nil
	})
	return err
}

// onMemberDone records a member run's reply. The reply that completes a
// step decides what follows, records it, and then emits it: the next step
// or the output. A reply the run does not wait for changes nothing.
func (c *coordinator) onMemberDone(ctx context.Context, msg *calf.Message) error {
	id := msg.Metadata.CorrelationID
	if id == "" {
		return permanent(fmt.Errorf("team: reply %s has no correlation id", msg.ID))
	}
	var ev agent.OutputEvent
	if err := msg.Decode(&ev); err != nil {
		return permanent(err)
	}
	if ev.RunID == "" {
		ev.RunID = msg.Metadata.RunID
	}
	// The member run the team started: named by the reply's ref, since the
	// run that answers may be another (the last of a handoff chain).
	run := ev.RunID
	if ev.Ref != "" {
		run = id + "." + ev.Ref
	}
	now := c.rt.Client().Now()
	st, err := update(ctx, c.rt.Store(), id, func(st *runState) (bool, error) {
		if st.Status.Terminal() {
			return false, nil
		}
		call := st.call(run)
		if call == nil || call.Done {
			return false, nil // another step's, or answered already
		}
		m := c.t.byName[call.Member]
		if m == nil {
			return false, permanent(fmt.Errorf("team %s: run %s: member %q is not in this team", c.t.name, id, call.Member))
		}
		call.Done = true
		if ev.Agent != "" && ev.Agent != call.Member {
			call.AnsweredBy = ev.Agent
		}
		if text, err := m.DecodeOutput(&ev); err != nil {
			call.Error = errorText(err)
		} else {
			call.Output = text
		}
		st.Usage, st.Cost = st.Usage.Add(ev.Usage), st.Cost.Add(ev.Cost)
		if st.allDone() {
			if err := c.t.advance(ctx, st, now); err != nil {
				return false, err
			}
			c.t.stampDeadlines(st, now)
			st.AdvancedBy = run
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if st.AdvancedBy == run {
		return c.next(ctx, st)
	}
	return nil
}

// next emits what the recorded state calls for: the current step, or the
// output of a run that has ended. Its events have deterministic ids.
func (c *coordinator) next(ctx context.Context, st *runState) error {
	if st.Status.Terminal() {
		return emitOutput(ctx, c.rt, st)
	}
	_, err := c.rt.Client().Emit(ctx, StepChannel(st.Team), StepEvent{Step: st.Step}, calf.WithID(stepID(st.RunID, st.Step)), calf.WithKey(st.RunID),
		calf.WithMetadata(calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID}))
	return err
}

// outputEvent is the team run's output, in the shape of an agent's.
func outputEvent(st *runState) agent.OutputEvent {
	ev := agent.OutputEvent{Error: st.Error, Usage: st.Usage, Cost: st.Cost, Steps: st.Step, RunID: st.RunID, Agent: st.Team}
	switch st.Status {
	case agent.RunComplete:
		ev.Status = agent.OutputComplete
		ev.Content, _ = json.Marshal(st.Output)
	case agent.RunCancelled:
		ev.Status = agent.OutputCancelled
	default:
		ev.Status = agent.OutputFailed
	}
	return ev
}

// emitOutput publishes an ended run's output on the team's output channel
// and, when the run has a ReplyTo, there too.
func emitOutput(ctx context.Context, rt *agent.Runtime, st *runState) error {
	ev := outputEvent(st)
	md := calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID, SessionID: st.SessionID}
	if _, err := rt.Client().Emit(ctx, OutputChannel(st.Team), ev, calf.WithID(outputID(st.RunID)), calf.WithKey(st.RunID), calf.WithMetadata(md)); err != nil {
		return err
	}
	r := st.ReplyTo
	if r == nil || r.Channel == "" {
		return nil
	}
	ev.Ref = r.Ref
	if r.CorrelationID != "" {
		md.CorrelationID = r.CorrelationID
	}
	key := r.Key
	if key == "" {
		key = st.RunID
	}
	_, err := rt.Client().Emit(ctx, r.Channel, ev, calf.WithID(replyID(st.RunID, r)), calf.WithKey(key), calf.WithMetadata(md))
	return err
}

// inputPrompt returns the prompt of a team's input message.
func inputPrompt(m *calf.Message) string {
	var in InputEvent
	if err := m.Decode(&in); err != nil {
		return "" // the input handler says what is wrong with it
	}
	return in.Content
}
