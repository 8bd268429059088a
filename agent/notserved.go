package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/store"
)

// refuseUnserved is what a handler does before it starts a child run (a
// subagent's, the run a handoff continues into, a team member's or a
// workflow node's), whose input m carries in: when no process serves the
// child's agent (the broker knows its input channel's group and it has
// no member, still, after the agent's default start timeout), it records
// the child run cancelled as not served, with a reason that names it,
// and sends its output where the run's output would go (in.ReplyTo), so
// that what waits on it learns at once rather than waiting in silence;
// it reports refused then, and the input is not to be sent. A broker that
// cannot tell, or an error asking it, refuses nothing.
func (rt *Runtime) refuseUnserved(ctx context.Context, agentName string, m *calf.Message, in *InputEvent) (refused bool, err error) {
	id := m.Metadata.RunID
	// A child refused before, whose output could not be sent then: send
	// it again.
	if st, err := rt.loadRun(ctx, id); err == nil {
		if st.NotServed && st.Status == RunCancelled {
			return true, rt.emitOutput(ctx, st)
		}
		return false, nil // started: the input is sent again, harmlessly
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	channel := InputChannel(agentName)
	deadline := time.Now().Add(DefaultStartTimeout)
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		n, known, err := calf.GroupMembers(ctx, rt.client.Broker(), channel)
		if err != nil || !known || n > 0 {
			return false, nil
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-time.After(min(wait, time.Until(deadline))):
		}
	}
	by := ""
	if in.Parent != "" {
		by = ", started by run " + in.Parent
	}
	reason := fmt.Sprintf("%v %s (run %s%s): nothing consumed its input channel %s within %s; start a worker that serves it (calf worker), or serve it in this process",
		ErrNotServed, agentName, id, by, channel, DefaultStartTimeout)
	now := rt.now()
	st := &runState{
		RunID: id, Agent: agentName, SessionID: m.Metadata.SessionID, Status: RunCancelled, Error: reason, NotServed: true,
		Lineage: engine.Lineage{ReplyTo: (*engine.ReplyTo)(in.ReplyTo), Parent: in.Parent, Chain: engineHops(in.Chain)},
		Depth:   in.Depth, Root: in.Root,
		StartedAt: now, EndedAt: now,
	}
	if c := m.Metadata.CorrelationID; c != "" && c != id {
		st.Correlation = c
	}
	data, err := st.encode()
	if err != nil {
		return false, err
	}
	if _, err := rt.store.Put(ctx, store.KindRun, id, data, 0); errors.Is(err, store.ErrConflict) {
		return false, nil // a worker took the run up meanwhile
	} else if err != nil {
		return false, err
	}
	rt.log.Warn("agent: a child run's agent is served by no process", "agent", agentName, "run", id, "parent", in.Parent)
	return true, rt.emitOutput(ctx, st)
}
