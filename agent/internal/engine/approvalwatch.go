package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
)

// approvalWatchEvery is how often an ApprovalWatch reads the approval
// requests it watches.
const approvalWatchEvery = time.Second

// An ApprovalWatch carries out, on a local broker ([calf.IsLocal]), the
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
type ApprovalWatch struct {
	client *calf.Client
	store  store.Store
	// runEnded reports whether a run has ended, or is gone.
	runEnded func(ctx context.Context, runID string) (bool, error)
	log      *slog.Logger

	mu  sync.Mutex
	ids map[string]bool
	// running is set while the goroutine that reads the requests runs.
	running bool
	// ctx ends when the client shuts down.
	ctx  context.Context
	stop context.CancelFunc
}

// NewApprovalWatch returns a watch that reads the requests from st, asks
// runEnded whether the run of a pending one has ended (or is gone), and
// publishes the answers with client, logging to log.
func NewApprovalWatch(client *calf.Client, st store.Store, runEnded func(ctx context.Context, runID string) (bool, error), log *slog.Logger) *ApprovalWatch {
	return &ApprovalWatch{client: client, store: st, runEnded: runEnded, log: log}
}

// Watch adds the approval request id, which a run waits for, to those
// watched.
func (w *ApprovalWatch) Watch(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		w.ctx, w.stop = context.WithCancel(context.Background())
		w.client.OnShutdown(w.stop)
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
		go w.read(w.ctx)
	}
}

// Unwatch drops the approval request id from those watched: its answer
// reached the handlers.
func (w *ApprovalWatch) Unwatch(id string) {
	w.mu.Lock()
	delete(w.ids, id)
	w.mu.Unlock()
}

// watching returns the ids watched, or stops the reading goroutine (and
// returns nil) when there are none.
func (w *ApprovalWatch) watching() []string {
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

// read reads the watched requests every approvalWatchEvery until none is
// left or ctx ends.
func (w *ApprovalWatch) read(ctx context.Context) {
	t := time.NewTicker(approvalWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
			return
		case <-t.C:
		}
		ids := w.watching()
		if ids == nil {
			return
		}
		for _, id := range ids {
			if err := w.readOne(ctx, id); err != nil && ctx.Err() == nil {
				w.log.Warn("agent: read a waiting approval request", "id", id, "err", err)
			}
		}
	}
}

// readOne publishes the answer of the watched request id once it is
// answered, and stops watching it then, or when it or its run is gone or
// the run ended.
func (w *ApprovalWatch) readOne(ctx context.Context, id string) error {
	a, err := approval.Get(ctx, w.store, id)
	if errors.Is(err, approval.ErrNotFound) {
		w.Unwatch(id)
		return nil
	}
	if err != nil {
		return err
	}
	if a.Status == approval.Pending {
		ended, err := w.runEnded(ctx, a.RunID)
		if err != nil {
			return err
		}
		if ended {
			w.Unwatch(id)
		}
		return nil
	}
	w.mu.Lock()
	watched := w.ids[id]
	w.mu.Unlock()
	if !watched {
		return nil // its answer arrived meanwhile
	}
	if err := approval.Publish(ctx, w.client, a); err != nil {
		return err
	}
	w.Unwatch(id)
	return nil
}
