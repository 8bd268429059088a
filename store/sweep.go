package store

import (
	"context"
	"errors"
	"time"
)

// sweepPage is how many records SweepEnded and DeletePrefix read at a time.
const sweepPage = 200

// A Sweeper removes from s what a kind of run (a team's, a workflow's)
// leaves behind once it ended before before, and returns how many runs
// and records it removed. Packages whose runs keep records of their own
// register one on the agent runtime they serve on (agent's
// Runtime.AddSweeper), so that its sweep removes them too.
type Sweeper func(ctx context.Context, s Store, before time.Time) (runs, records int, err error)

// SweepEnded is a helper for the sweepers of finished runs (see
// [Sweeper]): it reads the records of kind a page at a time, and for
// each whose run ended before before (as ended says), calls remove (when
// not nil), which deletes the run's other records and returns how many;
// then it deletes the record itself, unless it changed since it was read.
// It removes at most limit runs when limit is positive, and returns the
// runs and the records it removed.
func SweepEnded(ctx context.Context, s Store, kind string, before time.Time, limit int, ended func(data []byte) (time.Time, bool), remove func(rec Record) (int, error)) (runs, records int, err error) {
	for after := ""; ; {
		recs, err := s.List(ctx, kind, "", after, sweepPage)
		if err != nil {
			return runs, records, err
		}
		for _, rec := range recs {
			after = rec.ID
			at, done := ended(rec.Data)
			if !done || at.IsZero() || !at.Before(before) {
				continue
			}
			n := 0
			if remove != nil {
				if n, err = remove(rec); err != nil {
					return runs, records, err
				}
			}
			records += n
			if err := s.Delete(ctx, kind, rec.ID, rec.Version); errors.Is(err, ErrConflict) {
				continue
			} else if err != nil {
				return runs, records, err
			}
			runs++
			records++
			if limit > 0 && runs >= limit {
				return runs, records, nil
			}
		}
		if len(recs) < sweepPage {
			return runs, records, nil
		}
	}
}

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
