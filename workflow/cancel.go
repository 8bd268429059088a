package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
)

// CancelEvent asks a worker that serves the workflow to cancel a run, as
// [Workflow.Cancel] does: a cancel by name ([Kind]) publishes it from a
// process that does not have the workflow's definition, which says which
// child runs the cancel ends.
type CancelEvent struct {
	Reason string `json:"reason,omitempty"`
}

// CancelChannel returns the channel of the cancel requests of a
// workflow's runs ([CancelEvent], id "{run}.cancel", key the run id).
func CancelChannel(workflow string) string { return channelPrefix + workflow + "." + suffixCancel }

const suffixCancel = "cancel"

func cancelID(run string) string { return run + ".cancel" }

// requestCancel cancels the run runID of the workflow named workflow by
// name, with no workflow's definition (see [Kind]): it publishes a
// [CancelEvent], and a process that serves the workflow cancels the run
// as [Workflow.Cancel] does, its child runs in progress with it. It
// returns the run as it stands, which is still running until that worker
// handles the request (a request whose publish fails returns the error,
// and may be made again). Cancelling a run that has ended changes
// nothing; a run not recorded yet (its input may be on its way) is
// recorded cancelled, so that it never starts.
func requestCancel(ctx context.Context, rt *agent.Runtime, workflow, runID, reason string) (*RunInfo, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: cancel run %s: %w", workflow, runID, agent.ErrNoRuntime)
	}
	rec, err := rt.Store().Get(ctx, store.KindWorkflow, recordID(workflow, runID))
	if errors.Is(err, store.ErrNotFound) {
		// Not started yet (its input may be on its way): recorded
		// cancelled, it never starts.
		created, cerr := createCancelled(ctx, rt, workflow, runID, reason, rt.Client().Now())
		if cerr != nil {
			return nil, fmt.Errorf("workflow %s: cancel run %s: %w", workflow, runID, cerr)
		}
		if created {
			return loadRun(ctx, rt, workflow, runID)
		}
		rec, err = rt.Store().Get(ctx, store.KindWorkflow, recordID(workflow, runID))
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %s: cancel run %s: %w", workflow, runID, err)
	}
	st, err := decodeRunState(rec.Data)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: cancel run %s: %w", workflow, runID, err)
	}
	if st.Status.Terminal() {
		return st.info(), nil
	}
	if _, err := rt.Client().Emit(ctx, CancelChannel(workflow), CancelEvent{Reason: reason}, calf.WithID(cancelID(runID)), calf.WithKey(runID),
		calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID})); err != nil {
		return st.info(), fmt.Errorf("workflow %s: cancel run %s: %w", workflow, runID, err)
	}
	return st.info(), nil
}

// onCancel cancels the run a [CancelEvent] names, as Cancel does. A run
// that has ended, or that this process's store does not hold, is left
// alone.
func (h *handlers[S]) onCancel(ctx context.Context, msg *calf.Message) error {
	run, err := runOf(msg)
	if err != nil {
		return err
	}
	var ev CancelEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	err = h.w.cancel(ctx, h.rt, run, ev.Reason, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
