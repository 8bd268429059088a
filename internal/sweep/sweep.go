// Package sweep is what the sweepers of Calf's packages that keep run
// records (agent, team, workflow, deadletter, a2a) share: the removal of
// the records of runs that ended before a time, a page at a time.
package sweep

import (
	"context"
	"errors"
	"time"

	"github.com/calf-go/calf/store"
)

// page is how many records Ended reads at a time.
const page = 200

// Ended is what the sweepers of finished runs (each a [store.Sweeper])
// are built on: it reads the records of kind a page at a time, and for
// each whose run ended before before (as ended says), calls remove (when
// not nil), which deletes the run's other records and returns how many;
// then it deletes the record itself, unless it changed since it was read.
// It removes at most limit runs when limit is positive, and returns the
// runs and the records it removed.
func Ended(ctx context.Context, s store.Store, kind string, before time.Time, limit int, ended func(data []byte) (time.Time, bool), remove func(rec store.Record) (int, error)) (runs, records int, err error) {
	for after := ""; ; {
		recs, err := s.List(ctx, kind, "", after, page)
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
			if err := s.Delete(ctx, kind, rec.ID, rec.Version); errors.Is(err, store.ErrConflict) {
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
		if len(recs) < page {
			return runs, records, nil
		}
	}
}
