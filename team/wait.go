package team

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/runlife"
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
	f, err := runlife.Follow(ctx, rt.Client(), OutputChannel(t.name), runID)
	if err != nil {
		return nil, fmt.Errorf("team %s: wait for run %s: %w", t.name, runID, err)
	}
	defer f.Close()
	w := runlife.Wait{
		What:         fmt.Sprintf("team %s: wait for run %s", t.name, runID),
		Follower:     f,
		StartTimeout: agent.DefaultStartTimeout,
		Queued:       func(ctx context.Context) (bool, error) { return flow.Queued(ctx, rt.Store(), runID) },
		Load: func(ctx context.Context) (bool, error) {
			st, err := loadRunState(ctx, rt, runID)
			return err == nil && st.Status.Terminal(), err
		},
		Parked: func(m *calf.Message) error { return agent.ParkedError(m, t.ref(runID)) },
	}
	if err := w.Run(ctx); err != nil {
		return nil, err
	}
	return t.stored(ctx, rt, runID)
}
