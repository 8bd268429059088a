package workflow

import (
	"context"
	"encoding/json"
	"github.com/calf-go/calf/internal/signals"
	"time"

	"github.com/calf-go/calf/internal/sweep"
	"github.com/calf-go/calf/store"
)

// sweepRuns removes the workflow runs that ended before before, with their
// checkpoints; their agent nodes' runs are agent runs, which the agent
// sweepRuns removes.
func sweepRuns(ctx context.Context, s store.Store, before time.Time) (int, int, error) {
	return sweep.Ended(ctx, s, store.KindWorkflow, before, 0, func(data []byte) (time.Time, bool) {
		var head struct {
			Status  RunStatus `json:"status"`
			EndedAt time.Time `json:"ended_at"`
		}
		if json.Unmarshal(data, &head) != nil {
			return time.Time{}, false
		}
		return head.EndedAt, head.Status.Terminal()
	}, func(rec store.Record) (int, error) {
		var head struct {
			RunID    string `json:"run_id"`
			Workflow string `json:"workflow"`
		}
		if err := json.Unmarshal(rec.Data, &head); err != nil || head.RunID == "" {
			return 0, nil
		}
		n, err := store.DeletePrefix(ctx, s, store.KindCheckpoint, head.RunID+"/")
		if err != nil || head.Workflow == "" {
			return n, err
		}
		m, err := signals.Sweep(ctx, s, signalKey(head.Workflow, head.RunID))
		return n + m, err
	})
}
