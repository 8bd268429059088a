package agent

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/runlife"
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
	f, err := runlife.Follow(ctx, rt.client, OutputChannel(a.name), corr)
	if err != nil {
		return nil, fmt.Errorf("agent %s: wait for run %s: %w", a.name, runID, err)
	}
	defer f.Close()
	following := map[string]bool{a.name: true}
	follow := func(agent string) error {
		if agent == "" || following[agent] {
			return nil
		}
		following[agent] = true
		return f.Add(OutputChannel(agent))
	}
	w := runlife.Wait{
		What:         fmt.Sprintf("agent %s: wait for run %s", a.name, runID),
		Follower:     f,
		StartTimeout: a.opts.StartTimeout,
		Queued:       func(ctx context.Context) (bool, error) { return rt.flowQueued(ctx, runID) },
		Load: func(ctx context.Context) (bool, error) {
			st, err := rt.lastOfChain(ctx, runID)
			if err != nil || st.Status.Terminal() {
				return err == nil, err
			}
			// The run may have handed off: its chain ends on the output
			// channel of the agent it reached.
			return false, follow(st.Agent)
		},
		Parked: func(m *calf.Message) error {
			return ParkedError(m, RunRef{Kind: "agent", Name: a.name, RunID: runID})
		},
		Heard: func(m *calf.Message) error {
			var ev OutputEvent
			if m.Decode(&ev) == nil && ev.Handoff != nil {
				return follow(ev.Handoff.Agent)
			}
			return nil
		},
	}
	if err := w.Run(ctx); err != nil {
		return nil, err
	}
	return a.stored(ctx, rt, runID)
}
