package team

import (
	"context"
	"encoding/json"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/sweep"
	"github.com/calf-go/calf/store"
)

// sweepRuns removes the team runs that ended before before; their member runs
// are agent runs, which the agent sweep removes.
func sweepRuns(ctx context.Context, s store.Store, before time.Time) (int, int, error) {
	return sweep.Ended(ctx, s, store.KindTeam, before, 0, func(data []byte) (time.Time, bool) {
		var head struct {
			Status  agent.RunStatus `json:"status"`
			EndedAt time.Time       `json:"ended_at"`
		}
		if json.Unmarshal(data, &head) != nil {
			return time.Time{}, false
		}
		return head.EndedAt, head.Status.Terminal()
	}, nil)
}
