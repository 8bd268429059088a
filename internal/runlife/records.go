package runlife

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/store"
)

// Records are the records of one kind of run in a store, read and
// written with the kind's codec.
type Records[S any] struct {
	Store store.Store
	// Kind is the records' kind in the store.
	Kind string
	// Decode makes a record from its stored data; Encode, the data to
	// store (default: json.Marshal).
	Decode func(data []byte) (S, error)
	Encode func(st S) ([]byte, error)
}

// Update returns the update of the record of id, the record of the run
// run: one with no record is an error matching [store.ErrNotFound] that
// names run.
func (r *Records[S]) Update(id, run string) Update[S] {
	return func(ctx context.Context, change func(st S) (bool, error)) (S, error) {
		var st, zero S
		_, err := store.Update(ctx, r.Store, r.Kind, id, func(data []byte, exists bool) ([]byte, error) {
			if !exists {
				return nil, fmt.Errorf("no run %s: %w", run, store.ErrNotFound)
			}
			var err error
			if st, err = r.Decode(data); err != nil {
				return nil, err
			}
			changed, err := change(st)
			if err != nil || !changed {
				return nil, err
			}
			if r.Encode == nil {
				return json.Marshal(st)
			}
			return r.Encode(st)
		})
		if err != nil {
			return zero, err
		}
		return st, nil
	}
}
