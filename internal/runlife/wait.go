package runlife

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// The bounds of the time between two reads of a run's record while a
// [Wait] hears nothing of it: a safety net under the run's output events,
// which wake it at once.
const (
	RecheckMin = 250 * time.Millisecond
	RecheckMax = 5 * time.Second
)

// Wait waits for the end of one run. Its follower, set up by the caller
// before the first read of the record, follows the run's output channel
// (and whatever else tells of its end) and the dead-letter tree, so that
// an end after a read is heard.
type Wait struct {
	// What names the wait in errors, such as "agent lead: wait for run r1".
	What string
	// Follower follows the run's output and the dead letters.
	Follower *calf.Follower
	// StartTimeout is how long a run id of which no record exists is
	// waited for (its input may be on its way) before the wait fails with
	// an error matching [store.ErrNotFound].
	StartTimeout time.Duration
	// Load reads the run's record: ended reports that the caller's wait is
	// over (the run ended, or waits for an answer); an error matching
	// [store.ErrNotFound] that the run is not recorded yet. Load may add
	// channels to the follower (a handoff's next agent).
	Load func(ctx context.Context) (ended bool, err error)
	// Queued, when set, reports whether the run waits under flow control
	// (its input held until a slot frees up): the wait waits for it, its
	// StartTimeout counted from the time it leaves the queue.
	Queued func(ctx context.Context) (bool, error)
	// Parked returns the error of the run held up by the dead letter m, or
	// nil when m does not hold it up.
	Parked func(m *calf.Message) error
	// Heard, when set, is given every other message heard.
	Heard func(m *calf.Message) error
}

// Run waits until Load reports the end, and returns nil then (the caller
// reads the result from the store); or the run's parked error, an error
// matching [store.ErrNotFound] for a run never recorded, or one matching
// ctx's cause when ctx ends first.
func (w *Wait) Run(ctx context.Context) error {
	unknownAfter := time.Now().Add(w.StartTimeout)
	recheck := RecheckMin
	for {
		ended, lerr := w.Load(ctx)
		switch {
		case errors.Is(lerr, store.ErrNotFound):
			if w.Queued != nil {
				if q, err := w.Queued(ctx); err == nil && q {
					unknownAfter = time.Now().Add(w.StartTimeout)
				}
			}
			if !time.Now().Before(unknownAfter) {
				return fmt.Errorf("%s: no run of that id was recorded within %s: %w", w.What, w.StartTimeout, lerr)
			}
		case lerr != nil:
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", w.What, context.Cause(ctx))
			}
			return fmt.Errorf("%s: %w", w.What, lerr)
		case ended:
			return nil
		}
		wait := recheck
		if lerr != nil { // not recorded yet: look again by the deadline
			wait = min(wait, max(time.Until(unknownAfter), 0))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := w.Follower.Next(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%s: %w", w.What, context.Cause(ctx))
		case err != nil && wctx.Err() == nil:
			return fmt.Errorf("%s: %w", w.What, err)
		case err != nil:
			recheck = min(2*recheck, RecheckMax) // heard nothing
		case m.Channel == calf.DeadLetterChannel:
			if err := w.Parked(m); err != nil {
				return err
			}
		default:
			recheck = RecheckMin
			if w.Heard != nil {
				if err := w.Heard(m); err != nil {
					return fmt.Errorf("%s: %w", w.What, err)
				}
			}
		}
	}
}

// Follow follows, with c, the messages matching pattern whose correlation
// id is id, and the dead-letter tree: the follower of a [Wait]. Close it
// when done.
func Follow(ctx context.Context, c *calf.Client, pattern, id string) (*calf.Follower, error) {
	f, err := c.Follow(ctx, pattern, id)
	if err != nil {
		return nil, err
	}
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
