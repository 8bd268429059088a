package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// waitRecheck bounds the time between two reads of the run's state while
// [Agent.Wait] hears nothing of it: a safety net under the run's output
// events, which wake it at once.
const (
	waitRecheckMin = 250 * time.Millisecond
	waitRecheckMax = 5 * time.Second
)

// Wait waits until the run runID ends and returns its output, read from
// the store, or a *RunError for a run that failed or was cancelled; for a
// run that handed off, the output of its handoff chain: the last run's
// output and id, with the messages, tool calls, usage and steps of every
// run of the chain.
// A run that has ended answers at once. Use it after [Agent.Submit] or
// [Agent.Recover], in this process or another that shares the runtime's
// broker and store.
//
// Wait hears of the run's end from the output events of the agents of its
// chain and reads the end from the store, which it also reads again now
// and then while it hears nothing. A paused run is waited for until it
// resumes and ends. A run held up by a message parked on the dead-letter
// channel while Wait waits returns at once a *RunError matching
// [ErrRunParked]. A run id of which no run is recorded within the agent's
// StartTimeout (its input may be on its way: Submit returns before a
// worker takes it) returns an error matching [store.ErrNotFound]. When ctx
// ends first, Wait returns an error matching ctx's cause, and the run goes
// on: cancel it with [Agent.Cancel].
func (a *Agent[Out]) Wait(ctx context.Context, rt *Runtime, runID string) (*Output[Out], error) {
	if rt == nil {
		return nil, fmt.Errorf("agent %s: wait: %w", a.name, ErrNoRuntime)
	}
	if runID == "" {
		return nil, fmt.Errorf("agent %s: wait: no run id", a.name)
	}
	// The run's events carry its chain's correlation id: the run's own
	// id, unless a handoff started it.
	corr := runID
	if st, err := rt.loadRun(ctx, runID); err == nil {
		corr = st.correlationID()
	}
	f, err := rt.client.Follow(ctx, OutputChannel(a.name), corr)
	if err != nil {
		return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
	}
	defer f.Close()
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
	}
	following := map[string]bool{a.name: true}
	follow := func(agent string) error {
		if agent == "" || following[agent] {
			return nil
		}
		following[agent] = true
		return f.Add(OutputChannel(agent))
	}
	unknownAfter := time.Now().Add(a.opts.StartTimeout)
	recheck := waitRecheckMin
	for {
		// The store says whether the run has ended: the follower, set up
		// before this read, hears of any end after it.
		st, lerr := rt.lastOfChain(ctx, runID)
		switch err := lerr; {
		case errors.Is(err, store.ErrNotFound):
			if !time.Now().Before(unknownAfter) {
				return nil, fmt.Errorf("agent %s: wait for run %s: no run of that id was recorded within %s (the agent's StartTimeout): %w",
					a.name, runID, a.opts.StartTimeout, err)
			}
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, context.Cause(ctx))
			}
			return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
		case st.Status.Terminal():
			return a.stored(ctx, rt, runID)
		default:
			// The run may have handed off: its chain ends on the output
			// channel of the agent it reached.
			if err := follow(st.Agent); err != nil {
				return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
			}
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
			return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, context.Cause(ctx))
		case err != nil && wctx.Err() == nil:
			return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
		case err != nil:
			recheck = min(2*recheck, waitRecheckMax) // heard nothing
		case m.Channel == calf.DeadLetterChannel:
			if err := ParkedError(m, RunRef{Kind: "agent", Name: a.name, RunID: runID}); err != nil {
				return nil, err
			}
		default:
			recheck = waitRecheckMin
			var ev OutputEvent
			if m.Decode(&ev) == nil && ev.Handoff != nil {
				if err := follow(ev.Handoff.Agent); err != nil {
					return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
				}
			}
		}
	}
}
