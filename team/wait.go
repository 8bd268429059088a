package team

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
)

// waitRecheck bounds the time between two reads of a run's state while
// [Team.Wait] hears nothing of it: a safety net under the run's output
// event, which wakes it at once.
const (
	waitRecheckMin = 250 * time.Millisecond
	waitRecheckMax = 5 * time.Second
)

// Wait waits until the team run runID ends and returns its output, read
// from the store, or an *agent.RunError (of Kind "team") for a run that
// failed or was cancelled. A run that has ended answers at once. Use it
// after [Team.Submit] or [Team.Recover], in this process or another that
// shares the runtime's broker and store.
//
// Wait hears of the run's end from the team's output channel and reads
// the end from the store, which it also reads again now and then while it
// hears nothing. A paused run is waited for until it resumes and ends. A
// run held up by a message parked on the dead-letter channel while Wait
// waits returns at once an *agent.RunError matching agent.ErrRunParked. A
// run id of which no run is recorded within agent.DefaultStartTimeout
// (its input may be on its way: Submit returns before a coordinator takes
// it) returns an error matching [store.ErrNotFound]. When ctx ends first,
// Wait returns an error matching ctx's cause, and the run goes on: cancel
// it with [Team.Cancel].
func (t *Team) Wait(ctx context.Context, rt *agent.Runtime, runID string) (*Output, error) {
	if rt == nil {
		return nil, fmt.Errorf("team %s: wait: %w", t.name, agent.ErrNoRuntime)
	}
	if runID == "" {
		return nil, fmt.Errorf("team %s: wait: no run id", t.name)
	}
	f, err := rt.Client().Follow(ctx, OutputChannel(t.name), runID)
	if err != nil {
		return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, err)
	}
	defer f.Close()
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, err)
	}
	unknownAfter := time.Now().Add(agent.DefaultStartTimeout)
	recheck := waitRecheckMin
	for {
		// The store says whether the run has ended: the follower, set up
		// before this read, hears of any end after it.
		st, lerr := loadRunState(ctx, rt, runID)
		switch {
		case errors.Is(lerr, store.ErrNotFound):
			if !time.Now().Before(unknownAfter) {
				return nil, fmt.Errorf("team %s: wait for run %s: no run of that id was recorded within %s: %w",
					t.name, runID, agent.DefaultStartTimeout, lerr)
			}
		case lerr != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, context.Cause(ctx))
			}
			return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, lerr)
		case st.Status.Terminal():
			return t.stored(ctx, rt, runID)
		}
		wait := recheck
		if lerr != nil { // not recorded yet: look again by the deadline
			wait = min(wait, max(time.Until(unknownAfter), 0))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := f.Next(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, context.Cause(ctx))
		case err != nil && wctx.Err() == nil:
			return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, err)
		case err != nil:
			recheck = min(2*recheck, waitRecheckMax) // heard nothing
		case m.Channel == calf.DeadLetterChannel:
			if err := agent.ParkedError(m, t.ref(runID)); err != nil {
				return nil, err
			}
		default:
			recheck = waitRecheckMin
		}
	}
}
