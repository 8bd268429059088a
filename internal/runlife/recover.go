package runlife

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/store"
)

// recoverPage is how many records a [Recovery] reads at a time.
const recoverPage = 256

// Recovery is the walk of a Recover over the records of one kind of run:
// every record of Kind under Prefix (or those Runs names), each handed to
// One unless it was written at or after WrittenBefore.
type Recovery struct {
	// What names the recovery in errors, such as "team crew: recover".
	What  string
	Store store.Store
	// Kind is the records' kind; Prefix, the prefix of their ids ("" for
	// all of them).
	Kind, Prefix string
	// Runs, when not nil, are the ids of the only records to read, each by
	// its id; an id with no record is skipped.
	Runs []string
	// WrittenBefore, when set, skips the records written at or after it.
	WrittenBefore time.Time
	// One recovers the run of rec, and reports whether it did anything (a
	// record of another runner, or of a run with nothing to send, is
	// not). A record that does not decode is its error.
	One func(ctx context.Context, rec store.Record) (bool, error)
}

// Run walks the records and returns how many runs One recovered. A
// record whose recovery fails does not stop the others: the errors are
// returned together at the end, each with its record's id. When ctx ends,
// Run stops at once with an error matching its cause.
func (r *Recovery) Run(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	one := func(rec store.Record) error {
		if !r.WrittenBefore.IsZero() && !rec.UpdatedAt.Before(r.WrittenBefore) {
			return nil
		}
		ok, err := r.One(ctx, rec)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("%s: %w", r.What, context.Cause(ctx))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", rec.ID, err))
		case ok:
			n++
		}
		return nil
	}
	if r.Runs != nil {
		for _, id := range r.Runs {
			rec, err := r.Store.Get(ctx, r.Kind, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("%s: read %s: %w", r.What, id, errors.Join(append(errs, err)...))
			}
			if err := one(rec); err != nil {
				return n, err
			}
		}
	}
	for after := ""; r.Runs == nil; {
		recs, err := r.Store.List(ctx, r.Kind, r.Prefix, after, recoverPage)
		if err != nil {
			return n, fmt.Errorf("%s: %w", r.What, errors.Join(append(errs, err)...))
		}
		for _, rec := range recs {
			after = rec.ID
			if err := one(rec); err != nil {
				return n, err
			}
		}
		if len(recs) < recoverPage {
			break
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("%s: %w", r.What, errors.Join(errs...))
	}
	return n, nil
}
