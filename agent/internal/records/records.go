// Package records holds what the agent engine and the sessions share about
// their stored records: the error of a record that does not decode, and
// lists kept in records of a fixed number of items (chunks), so that a
// record written often stays small however long its list grows.
package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf/store"
)

// ErrCorrupt is returned when a stored record does not decode; package
// agent exports it as ErrCorruptState.
var ErrCorrupt = errors.New("agent: corrupt stored state")

// Page is how many records a reader lists at a time.
const Page = 256

// PutChunk writes v as the record of kind and id, create-only: a chunk's
// content is the same whoever writes it, so one written already stays.
func PutChunk(ctx context.Context, s store.Store, kind, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.Put(ctx, kind, id, data, 0); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// ReadChunks reads the n records of kind with the ids key(0) to
// key(n-1), which must sort in that order and share the prefix key(0)
// has before its last 8 characters, and returns the items they hold, in
// order: size items each, decoded by decode. A record missing, out of
// place or of another size is an error matching [ErrCorrupt]; of names
// what the records belong to, for errors.
func ReadChunks[T any](ctx context.Context, s store.Store, kind, of string, n, size int, key func(int) string, decode func([]byte) ([]T, error)) ([]T, error) {
	out := make([]T, 0, n*size)
	first := key(0)
	prefix := first[:len(first)-8]
	for after := ""; len(out) < n*size; {
		recs, err := s.List(ctx, kind, prefix, after, min(Page, n-len(out)/size))
		if err != nil {
			return nil, fmt.Errorf("agent: load %s: %w", of, err)
		}
		if len(recs) == 0 {
			break
		}
		for _, rec := range recs {
			if want := key(len(out) / size); rec.ID != want {
				return nil, fmt.Errorf("%w: %s: record %s is missing", ErrCorrupt, of, want)
			}
			items, err := decode(rec.Data)
			if err != nil || len(items) != size {
				return nil, fmt.Errorf("%w: %s: record %s", ErrCorrupt, of, rec.ID)
			}
			out = append(out, items...)
		}
		after = recs[len(recs)-1].ID
	}
	if len(out) != n*size {
		return nil, fmt.Errorf("%w: %s: %d of its %d records are stored", ErrCorrupt, of, len(out)/size, n)
	}
	return out, nil
}
