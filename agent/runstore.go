package agent

import (
	"context"

	"github.com/calf-go/calf/agent/internal/runstore"
)

// runStore is how the engine reads and writes runs and their tool results
// (runstore.Store): the handlers and the runtime call it, and never ask
// whether the broker is local. It follows the shared store protocol, or
// its shortcut on a local broker, picked once per runtime.
type runStore = runstore.Store[*runState, ToolResultEvent]

// newRunStore returns the run store of rt: with the local shortcut on a
// local broker, with the shared store protocol on any other.
func newRunStore(rt *Runtime, local bool) *runStore {
	return runstore.New(rt.store, runStates{rt}, local)
}

// runStates is what the run store needs to know of the runs' states and
// their tool results, and the runtime's part of reading and writing them
// (runstore.Runs).
type runStates struct{ rt *Runtime }

var _ runstore.Runs[*runState, ToolResultEvent] = runStates{}

func (runStates) Decode(data []byte) (*runState, error) { return decodeRunState(data) }

func (runStates) Clone(st *runState) *runState { return st.clone() }

func (runStates) Encode(st *runState) ([]byte, error) { return st.encode() }

func (runStates) ID(st *runState) string { return st.RunID }

// ReadBack reads back what a bare state's record leaves out (see
// Runtime.readBack).
func (r runStates) ReadBack(ctx context.Context, st *runState) (bool, error) {
	if !st.Bare() {
		return false, nil
	}
	return true, r.rt.readBack(ctx, st)
}

// Archive moves old messages and tool calls of st's record to chunks (see
// Runtime.archive).
func (r runStates) Archive(ctx context.Context, st *runState) error { return r.rt.archive(ctx, st) }

func (runStates) Call(res ToolResultEvent) (int, string) { return res.Step, res.ToolCallID }

func (runStates) Due(st *runState, step int) bool {
	return !st.Status.Terminal() && st.Step == step && st.Phase == phaseInference && st.Pause == nil
}

func (runStates) Awaits(st *runState, step int) bool {
	return !st.Status.Terminal() && st.Step == step && st.Phase == phaseTools
}

func (runStates) Answered(st *runState, step int, id string) bool { return st.answered(step, id) }

func (runStates) ResultFor(st *runState, step int, id string) (ToolResultEvent, bool) {
	return st.resultFor(step, id)
}
