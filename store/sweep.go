package store

import (
	"context"
	"time"
)

// sweepPage is how many records DeletePrefix reads at a time.
const sweepPage = 200

// A Sweeper removes from s what a kind of run (a team's, a workflow's)
// leaves behind once it ended before before, and returns how many runs
// and records it removed. Packages whose runs keep records of their own
// register one on the agent runtime they serve on (agent's
// Runtime.AddSweeper), so that its sweep removes them too.
type Sweeper func(ctx context.Context, s Store, before time.Time) (runs, records int, err error)

// DeletePrefix deletes the records of kind whose ids start with prefix,
// and returns how many it deleted.
func DeletePrefix(ctx context.Context, s Store, kind, prefix string) (int, error) {
	n := 0
	for {
		recs, err := s.List(ctx, kind, prefix, "", sweepPage)
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			if err := s.Delete(ctx, kind, r.ID, 0); err != nil {
				return n, err
			}
			n++
		}
		if len(recs) < sweepPage {
			return n, nil
		}
	}
}
