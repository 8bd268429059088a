package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/store"
)

// KindRunMessages is the store kind of a long run's archived messages and
// tool call records, [Chunk] to a record: the id of chunk n of its
// messages is "{run id}/m{n, 8 digits}", of its tool call records
// "{run id}/c{n, 8 digits}" ([ChunkKey]). A chunk is written once, and
// swept with its run.
const KindRunMessages = "run_messages"

// Chunk is how many messages, or tool call records, a [KindRunMessages]
// record holds. A run's record holds up to twice as many, less one: at
// that many, the first Chunk go to a chunk.
const Chunk = 8

// ChunkKey is the id of chunk n of the archived messages (what 'm') or
// tool call records ('c') of run.
func ChunkKey(run string, what byte, n int) string { return fmt.Sprintf("%s/%c%08d", run, what, n) }

// PutChunk writes chunk n of the archived messages or tool call records
// (what) of run, create-only (see [records.PutChunk]).
func PutChunk[T any](ctx context.Context, s store.Store, run string, what byte, n int, items []T) error {
	return records.PutChunk(ctx, s, KindRunMessages, ChunkKey(run, what, n), items)
}

// ReadChunks reads the count archived messages or tool call records
// (what) of run back, in order. Chunks missing or of another size are a
// permanent error matching [records.ErrCorrupt].
func ReadChunks[T any](ctx context.Context, s store.Store, run string, what byte, count int) ([]T, error) {
	if count == 0 {
		return nil, nil
	}
	out, err := records.ReadChunks(ctx, s, KindRunMessages, "run "+run, count/Chunk, Chunk,
		func(n int) string { return ChunkKey(run, what, n) },
		func(data []byte) (items []T, err error) { return items, json.Unmarshal(data, &items) })
	if errors.Is(err, records.ErrCorrupt) {
		return nil, calf.Permanent(err)
	}
	return out, err
}
