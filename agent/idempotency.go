package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/calf-go/calf/internal/idem"
)

// DefaultIdempotencyWindow is the default of
// [RuntimeOptions.IdempotencyWindow].
const DefaultIdempotencyWindow = 24 * time.Hour

// ErrIdempotencyConflict is matched by the error of a request whose
// idempotency key was first used with another request.
var ErrIdempotencyConflict = idem.ErrConflict

// RunForKey returns the id of the run that the caller's idempotency key
// names within scope (such as "agent/NAME"): the run its first request
// started, within the runtime's [RuntimeOptions.IdempotencyWindow]; or,
// for a key not in use (or expired), runID, which it records for the key.
// request is the request as JSON (or a value to encode): another request
// under a key in use is an error matching [ErrIdempotencyConflict].
// Agents, teams and workflows call it for [RunOptions.IdempotencyKey]; a
// program with an entry point of its own calls it to make that entry
// point idempotent, then starts (or waits for) the run it returns, whose
// id, submitted again, starts nothing new.
func (rt *Runtime) RunForKey(ctx context.Context, scope, key string, request any, runID string) (string, error) {
	if rt == nil {
		return "", ErrNoRuntime
	}
	data, ok := request.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(request); err != nil {
			return "", fmt.Errorf("idempotency key %q: encode the request: %w", key, err)
		}
	}
	if runID == "" {
		runID = rt.newID()
	}
	return idem.Claim(ctx, rt.store, scope, key, idem.Digest(data), runID, rt.now(), rt.idemWindow)
}
