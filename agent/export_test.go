package agent

import (
	"context"

	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/tool"
)

// What the package's external tests see of the run's stored state, which
// is not part of the API.

type (
	RunState   = runState
	HistoryRef = engine.HistoryRef
	Transcript = engine.Transcript
	StoredHop  = engine.Hop
)

const (
	PhaseInference  = phaseInference
	PhaseTools      = phaseTools
	KindRunMessages = runstore.KindRunMessages
)

// RunCached reports whether the runtime's cache of run states holds run id.
func (rt *Runtime) RunCached(id string) bool { return rt.runs.Version(id) >= 0 }

// DecodeRunState decodes a run's record.
func DecodeRunState(data []byte) (*RunState, error) { return decodeRunState(data) }

// LoadState returns the stored state of a run, whole, as LoadRun's view
// is made from.
func (rt *Runtime) LoadState(ctx context.Context, runID string) (*RunState, error) {
	st, err := rt.loadRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return st.detached()
}

// Channels and names of the engine that the tests address directly.
var (
	InferenceChannel  = inferenceChannel
	ToolResultChannel = toolResultChannel
	SubagentRunID     = engine.SubagentRunID
)

// InferenceEvent is the payload of the inference channel.
type InferenceEvent = inferenceEvent

// KindAgentState is the store kind of custom agents' state.
const KindAgentState = kindAgentState

// The permission decisions, and the late tool results, for the tests.
const (
	PermissionAllow   = decideAllow
	PermissionDeny    = decideDeny
	PermissionAskUser = decideAsk
)

// Decide is Permissions.decide.
func (p *Permissions) Decide(name string, kind tool.Kind) (permissionDecision, string) {
	return p.decide(name, kind)
}

// LateToolResults is Runtime.lateToolResults.
func (rt *Runtime) LateToolResults() int64 { return rt.lateToolResults() }

// KindCustomCall is the store kind of a custom step's recorded calls.
const KindCustomCall = engine.KindCustomCall
