package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
)

// approvalWatchEvery is how often a runtime on a local broker reads the
// approval requests its runs wait for (see approvalWatch).
const approvalWatchEvery = time.Second

// approvalWatch carries out, on a local broker ([calf.IsLocal]), the
// answers that other processes record in the shared store.
//
// On a broker other processes reach, [approval.Respond] publishes an
// answer where the workers hear it. An in-process broker reaches no other
// process: a person who answers from another one (calf approvals approve
// against the SQLite file of a calf run) can only record the answer in the
// store. So a runtime on a local broker keeps the ids of the requests its
// runs wait for, and while there are any, reads them every
// approvalWatchEvery; an answered one is published as Respond would have
// published it ([approval.Publish]: the same message ids, so
// that an answer published both ways is carried out once, as a
// redelivered one is). A request whose run ended, or that is gone, is
// dropped. With no request waiting, nothing is read.
type approvalWatch struct {
	mu  sync.Mutex
	ids map[string]bool
	// running is set while the goroutine that reads the requests runs.
	running bool
	// ctx ends when the runtime's client shuts down.
	ctx  context.Context
	stop context.CancelFunc
}

// watchApproval adds the approval request id, which a run of this runtime
// waits for, to those it watches. It does nothing on a broker other
// processes reach.
func (rt *Runtime) watchApproval(id string) {
	if !rt.inProcessBroker() {
		return
	}
	w := &rt.approvals
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		w.ctx, w.stop = context.WithCancel(context.Background())
		rt.client.OnShutdown(w.stop)
	}
	if w.ctx.Err() != nil || w.ids[id] {
		return
	}
	if w.ids == nil {
		w.ids = map[string]bool{}
	}
	w.ids[id] = true
	if !w.running {
		w.running = true
		go rt.readApprovals(w.ctx)
	}
}

// unwatchApproval drops the approval request id from those watched: its
// answer reached the runtime's handlers.
func (rt *Runtime) unwatchApproval(id string) {
	if !rt.inProcessBroker() {
		return
	}
	w := &rt.approvals
	w.mu.Lock()
	delete(w.ids, id)
	w.mu.Unlock()
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

// watching returns the ids watched, or stops the reading goroutine (and
// returns nil) when there are none.
func (w *approvalWatch) watching() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ids) == 0 {
		w.running = false
		return nil
	}
	ids := make([]string, 0, len(w.ids))
	for id := range w.ids {
		ids = append(ids, id)
	}
	return ids
}

// readApprovals reads the watched requests every approvalWatchEvery until
// none is left or ctx ends.
func (rt *Runtime) readApprovals(ctx context.Context) {
	t := time.NewTicker(approvalWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rt.approvals.mu.Lock()
			rt.approvals.running = false
			rt.approvals.mu.Unlock()
			return
		case <-t.C:
		}
		ids := rt.approvals.watching()
		if ids == nil {
			return
		}
		for _, id := range ids {
			if err := rt.readApproval(ctx, id); err != nil && ctx.Err() == nil {
				rt.log.Warn("agent: read a waiting approval request", "id", id, "err", err)
			}
		}
	}
}

// readApproval publishes the answer of the watched request id once it is
// answered, and stops watching it then, or when it or its run is gone or
// the run ended.
func (rt *Runtime) readApproval(ctx context.Context, id string) error {
	a, err := approval.Get(ctx, rt.store, id)
	if errors.Is(err, approval.ErrNotFound) {
		rt.unwatchApproval(id)
		return nil
	}
	if err != nil {
		return err
	}
	if a.Status == approval.Pending {
		st, err := rt.loadRun(ctx, a.RunID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rt.unwatchApproval(id)
		case err != nil:
			return err
		case st.Status.Terminal():
			rt.unwatchApproval(id)
		}
		return nil
	}
	rt.approvals.mu.Lock()
	watched := rt.approvals.ids[id]
	rt.approvals.mu.Unlock()
	if !watched {
		return nil // its answer arrived meanwhile
	}
	if err := approval.Publish(ctx, rt.client, a); err != nil {
		return err
	}
	rt.unwatchApproval(id)
	return nil
}
