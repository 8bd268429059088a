package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
)

// EndApprovals records as [approval.Cancelled], at now, the pending
// approval requests in s of the run runID and of the runs it started
// whose runs have ended, so that they end with them. A request answered
// meanwhile is left as it is.
func EndApprovals(ctx context.Context, s store.Store, runID string, now func() time.Time) error {
	reqs, err := approval.List(ctx, s, runID, approval.Cancelled)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		_, err := store.Update(ctx, s, approval.Kind, r.ID, func(data []byte, exists bool) ([]byte, error) {
			if !exists {
				return nil, nil
			}
			a, err := approval.Decode(data)
			if err != nil || a.Status != approval.Pending {
				return nil, err // answered meanwhile, or recorded already
			}
			a.Status, a.Message, a.AnsweredAt = approval.Cancelled, r.Message, now()
			return json.Marshal(a)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
