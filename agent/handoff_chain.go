package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// maxChain bounds the handoffs followed when reading a chain from the
// store, against a corrupt chain that loops.
const maxChain = 1000

// lastOfChain returns the state of the run id or, if it handed off, of the
// last run of its handoff chain.
func (rt *Runtime) lastOfChain(ctx context.Context, id string) (*runState, error) {
	st, err := rt.loadRun(ctx, id)
	for hops := 0; err == nil && st.Status == RunHandedOff && st.HandedOffTo != nil; hops++ {
		if hops >= maxChain {
			return nil, fmt.Errorf("%w: run %s: handoff chain longer than %d", ErrCorruptState, id, maxChain)
		}
		to := st.HandedOffTo
		if st, err = rt.loadRun(ctx, to.RunID); errors.Is(err, store.ErrNotFound) {
			return &runState{RunID: to.RunID, Agent: to.Agent, Status: RunRunning}, nil // not started yet
		}
	}
	return st, err
}

// withChain returns st, the last run of a handoff chain, as the output of
// the whole chain: the messages each run added, the tool calls, usage and
// steps of every run in order, from the first run's start. A run that did
// not complete, or has no chain, is returned as is.
func (rt *Runtime) withChain(ctx context.Context, st *runState) (*runState, error) {
	if len(st.Chain) == 0 || st.Status != RunComplete {
		return st, nil
	}
	c := *st
	c.Messages, c.ToolCalls, c.Usage, c.Cost, c.Step, c.HistoryLen = nil, nil, model.Usage{}, model.Cost{}, 0, 0
	c.Inherited = nil // counted run by run below
	for i, h := range append(slices.Clone(st.Chain), engine.Hop{Agent: st.Agent, RunID: st.RunID}) {
		hs := st
		if i < len(st.Chain) {
			var err error
			if hs, err = rt.loadRun(ctx, h.RunID); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			c.StartedAt = hs.StartedAt
		}
		c.Messages = append(c.Messages, hs.NewMessages()...)
		c.ToolCalls = append(c.ToolCalls, hs.ToolCalls...)
		c.Usage, c.Cost = c.Usage.Add(hs.Usage), c.Cost.Add(hs.Cost)
		c.Step += hs.Step
	}
	return &c, nil
}

// followChain follows the events of a run and of the runs its handoffs
// lead to, on all the channels of the agents that the chain may reach (the
// first is the run's own agent): see engine.FollowChain.
func followChain(ctx context.Context, rt *Runtime, agents []string, id string) (*calf.Follower, error) {
	patterns := make([]string, len(agents))
	for i, name := range agents {
		patterns[i] = AllChannels(name)
	}
	return engine.FollowChain(ctx, rt.client, patterns, id)
}
