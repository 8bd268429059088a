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

// approvalWatchEvery is how often an ApprovalWatch reads the index of
// answers recorded without a broker.
const approvalWatchEvery = time.Second

// approvalWatchPage is how many answers a read takes at a time.
const approvalWatchPage = 256

// An ApprovalWatch carries out, on a local broker ([calf.IsLocal]), the
// answers that other processes record in the shared store.
//
// On a broker other processes reach, [approval.Respond] publishes an
// answer where the workers hear it. An in-process broker reaches no other
// process: a person who answers from another one (calf approvals approve
// against the SQLite file of a calf run) can only record the answer in the
// store, which indexes it ([approval.KindAnswered]). So once a run of a
// runtime on a local broker waits for a request, the runtime reads that
// index every approvalWatchEvery, until its client shuts down; each
// answer found is published as Respond would have published it
// ([approval.Publish]: the same message ids, so that an answer published
// both ways is carried out once, as a redelivered one is), and its entry
// removed. Nothing is kept per waiting request: a million runs waiting
// cost the watch nothing but its read of an index that is empty while
// nobody answers.
type ApprovalWatch struct {
	client *calf.Client
	store  store.Store
	log    *slog.Logger

	mu      sync.Mutex
	running bool
}

// NewApprovalWatch returns a watch that reads the answers from st and
// publishes them with client, logging to log.
func NewApprovalWatch(client *calf.Client, st store.Store, log *slog.Logger) *ApprovalWatch {
	return &ApprovalWatch{client: client, store: st, log: log}
}

// Watch starts the reading of the answers, once: a run waits for the
// approval request id.
func (w *ApprovalWatch) Watch(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return
	}
	w.running = true
	ctx, stop := context.WithCancel(context.Background())
	w.client.OnShutdown(stop)
	go w.read(ctx)
}

// read reads the index every approvalWatchEvery until ctx ends.
func (w *ApprovalWatch) read(ctx context.Context) {
	t := time.NewTicker(approvalWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.readOnce(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("agent: read the answered approval requests", "err", err)
		}
	}
}

// readOnce publishes the answers in the index, and removes their entries.
func (w *ApprovalWatch) readOnce(ctx context.Context) error {
	for {
		recs, err := w.store.List(ctx, approval.KindAnswered, "", "", approvalWatchPage)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			a, err := approval.Get(ctx, w.store, rec.ID)
			switch {
			case errors.Is(err, approval.ErrNotFound):
			case err != nil:
				return err
			case a.Status != approval.Pending:
				if err := approval.Publish(ctx, w.client, a); err != nil {
					return err
				}
			}
			if err := w.store.Delete(ctx, approval.KindAnswered, rec.ID, rec.Version); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		if len(recs) < approvalWatchPage {
			return nil
		}
	}
}
