// Package idem keeps callers' idempotency keys: a key names the run that
// its first request started, for a window, so that the same request
// under the same key (sent again after a timeout, a lost answer, a
// restart) gets that run and its answer instead of a second one. A
// record of kind "idempotency" under "{scope}/{key}" holds the run id,
// a digest of the request and when the key expires; a different request
// under a key in use is refused.
package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/store"
)

// Kind is the store kind of a key's record.
const Kind = "idempotency"

// MaxKeyLen bounds a key.
const MaxKeyLen = 256

// ErrConflict is matched by the error of a request that differs from the
// one its key was first used with.
var ErrConflict = errors.New("idempotency key reused with a different request")

// record is what a key's record holds.
type record struct {
	RunID   string    `json:"run_id"`
	Digest  string    `json:"digest"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Digest returns the digest of a request.
func Digest(request []byte) string {
	sum := sha256.Sum256(request)
	return hex.EncodeToString(sum[:])
}

// Claim returns the run id that key names within scope: the run of the
// first request under it, unless it has expired; else it records runID
// for the key, for window from now, and returns it. A request whose
// digest differs from the first's is an error matching [ErrConflict].
func Claim(ctx context.Context, s store.Store, scope, key, digest, runID string, now time.Time, window time.Duration) (string, error) {
	if key == "" || len(key) > MaxKeyLen {
		return "", fmt.Errorf("an idempotency key has 1 to %d bytes, not %d", MaxKeyLen, len(key))
	}
	id := scope + "/" + key
	fresh := record{RunID: runID, Digest: digest, Created: now.UTC(), Expires: now.Add(window).UTC()}
	var got record
	_, err := store.CreateOrUpdate(ctx, s, Kind, id, func(data []byte, exists bool) ([]byte, error) {
		if exists {
			if err := json.Unmarshal(data, &got); err == nil && now.Before(got.Expires) {
				return nil, nil // in use: the first request's run
			}
		}
		got = fresh
		return json.Marshal(fresh)
	})
	if err != nil {
		return "", fmt.Errorf("idempotency key %q: %w", key, err)
	}
	if got.Digest != digest {
		return "", fmt.Errorf("%w: key %q was first used %s ago with another request (run %s); use a new key for a new request",
			ErrConflict, key, now.Sub(got.Created).Round(time.Second), got.RunID)
	}
	return got.RunID, nil
}

// Sweep removes the keys that expired before before, and returns how
// many.
func Sweep(ctx context.Context, s store.Store, before time.Time) (int, error) {
	n := 0
	for after := ""; ; {
		recs, err := s.List(ctx, Kind, "", after, 256)
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			after = r.ID
			var rec record
			if json.Unmarshal(r.Data, &rec) == nil && !rec.Expires.Before(before) {
				continue
			}
			if err := s.Delete(ctx, Kind, r.ID, r.Version); err != nil && !errors.Is(err, store.ErrConflict) {
				return n, err
			}
			n++
		}
		if len(recs) < 256 {
			return n, nil
		}
	}
}

// Release gives up key within scope when it still names runID: a request
// that claimed the key and then failed, having done nothing, releases it
// so that the same request sent again is carried out instead of being
// taken for done.
func Release(ctx context.Context, s store.Store, scope, key, runID string) error {
	id := scope + "/" + key
	rec, err := s.Get(ctx, Kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var got record
	if json.Unmarshal(rec.Data, &got) != nil || got.RunID != runID {
		return nil
	}
	if err := s.Delete(ctx, Kind, id, rec.Version); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
