package agent

import (
	"github.com/calf-go/calf"
)

// watchApproval has the runtime's approval watch read the answers that
// other processes record (see engine.ApprovalWatch): a run of this
// runtime waits for the approval request id. It does nothing on a broker
// other processes reach, which carries the answers itself.
func (rt *Runtime) watchApproval(id string) {
	if rt.inProcessBroker() {
		rt.approvals.Watch(id)
	}
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
