package agent

import (
	"context"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/signals"
)

// awaitAnswer has the run of the pending request a wait for its answer
// as a signal of the run ([signals.Await]): the answer, which
// [approval.Respond] or an expiry sends, wakes the run with an event on
// the agent's approval channel that is the answer itself
// ([approval.EventID]), which onApproval carries out. On an in-process
// broker, an answer sent by another process is found in the store
// ([signals.Watch], which ServeTimers runs).
func (rt *Runtime) awaitAnswer(ctx context.Context, a *approval.Approval) error {
	answered := *a
	answered.Status = approval.Approved // any answer: for its id
	return signals.Await(ctx, rt.signalEnv(), agentSignalKey(a.Agent, a.RunID), signals.ApprovalName(a.ToolCallID), signals.Wake{
		Channel: approval.Channel(a.Agent), Key: a.RunID, EventID: approval.EventID(&answered),
		Metadata: approval.Metadata(a), Once: true, Value: true,
	})
}

// inProcessBroker reports whether the runtime's broker reaches no other
// process ([calf.IsLocal]), a worker's included: the worker's wrapper
// (drainBroker) is looked through here, though not for the run store
// (newRunStore).
func (rt *Runtime) inProcessBroker() bool {
	b := rt.client.Broker()
	if d, ok := b.(*drainBroker); ok {
		b = d.Broker
	}
	return calf.IsLocal(b)
}
