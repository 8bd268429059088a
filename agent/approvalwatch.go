package agent

import (
	"context"
	"errors"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// watchApproval adds the approval request id, which a run of this runtime
// waits for, to those its approval watch reads from the store (see
// engine.ApprovalWatch). It does nothing on a broker other processes
// reach, which carries the answers itself.
func (rt *Runtime) watchApproval(id string) {
	if rt.inProcessBroker() {
		rt.approvals.Watch(id)
	}
}

// unwatchApproval drops the approval request id from those watched: its
// answer reached the runtime's handlers.
func (rt *Runtime) unwatchApproval(id string) {
	if rt.inProcessBroker() {
		rt.approvals.Unwatch(id)
	}
}

// runEnded reports whether the run runID has ended, or is gone: the
// approval watch then stops reading the request the run waited for.
func (rt *Runtime) runEnded(ctx context.Context, runID string) (bool, error) {
	st, err := rt.loadRun(ctx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	}
	return st.Status.Terminal(), nil
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
