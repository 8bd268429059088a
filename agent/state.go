package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/agent/internal/runprogress"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// RunStatus is the lifecycle state of a run.
type RunStatus string

// Run statuses.
const (
	RunRunning   RunStatus = "running"
	RunComplete  RunStatus = "complete"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
	// RunHandedOff: the run handed its conversation to another agent's run
	// (runState.HandedOffTo), which answers in its place.
	RunHandedOff RunStatus = "handed_off"
	// RunQueued: the run waits under flow control ([FlowControl]) before
	// it starts, with no record of its own yet ([QueuedRun]).
	RunQueued RunStatus = "queued"
)

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool { return runprogress.Terminal(string(s)) }

// The phases of a running run (engine.Phase): what it waits for.
const (
	phaseInference = engine.PhaseInference
	phaseTools     = engine.PhaseTools
)

// runState is the stored state of one run: everything a handler on any
// worker needs to take the next step. It is saved under
// [store.KindRun] with the run id. It is not part of the API (readers get
// a [RunInfo]), but its JSON is a stored format: records written by
// earlier versions must decode (testdata/records, TestStoredRecords), so
// a field is added, never renamed or given another meaning.
type runState struct {
	RunID     string       `json:"run_id"`
	Agent     string       `json:"agent"`
	SessionID string       `json:"session_id,omitempty"`
	Status    RunStatus    `json:"status"`
	Phase     engine.Phase `json:"phase,omitempty"`
	// Step is the current model call, from 1.
	Step int `json:"step"`
	// Transcript holds the conversation: the messages, where the first of
	// them are kept (the session's history, archived chunks), what the
	// model sees in their place (Compacted) and the size of its last
	// input. A state decoded from a record that keeps messages apart
	// holds only the record's until they are read back (Runtime.readBack);
	// [Runtime.LoadRun] returns it whole.
	engine.Transcript
	// Pending are the tool calls of the current step, with their results
	// as they arrive.
	Pending []pendingCall `json:"pending,omitempty"`
	// AdvancedBy is the tool call whose result completed the previous step.
	AdvancedBy string `json:"advanced_by,omitempty"`
	// ToolCalls records every tool call of the run with its result.
	ToolCalls []ToolCallRecord `json:"tool_calls,omitempty"`
	// Usage counts the run's model calls, with those of the runs it
	// started (subagents).
	Usage model.Usage `json:"usage"`
	// Repairs counts model calls spent on correcting invalid output.
	Repairs int `json:"repairs,omitempty"`
	// Deltas is the number of stream deltas emitted for the response
	// recorded at the current step; the step's tool calls and the run's
	// output carry it so that a stream yields them after those deltas.
	Deltas int `json:"deltas,omitempty"`
	// Output is the final output (see [OutputEvent.Content]).
	Output json.RawMessage `json:"output,omitempty"`
	// Error explains a failed or cancelled run.
	Error string `json:"error,omitempty"`
	// Guardrail is the guardrail that ended the run, if one did.
	Guardrail *GuardrailTrip `json:"guardrail,omitempty"`
	// NotServed marks a run that ended because no process serves its
	// agent, or the agent of a run it started: its error matches
	// [ErrNotServed].
	NotServed bool `json:"not_served,omitempty"`
	// Deps are the serialized dependencies that travel with the run.
	Deps   json.RawMessage `json:"deps,omitempty"`
	Stream bool            `json:"stream,omitempty"`
	// Lineage links the run to others: where its output goes (ReplyTo),
	// its parent, its correlation id, its handoff chain and the run it
	// handed off to.
	engine.Lineage
	// Deadline, when set, ends the run at the first step after it.
	Deadline time.Time `json:"deadline,omitzero"`
	// MaxTurns, when positive, lowers the agent's maximum turns for this run.
	MaxTurns int `json:"max_turns,omitempty"`
	// Permissions, when set, replace the agent's for this run.
	Permissions *Permissions `json:"permissions,omitempty"`
	// Depth is how many subagent calls deep the run is.
	Depth int `json:"depth,omitempty"`
	// Root is the run a caller started, for a subagent's run.
	Root *approval.Root `json:"root,omitempty"`
	// Cost is what the run's model calls cost, with those of the runs it
	// started (subagents); Usage counts theirs too.
	Cost model.Cost `json:"cost"`
	// Inherited is what the runs before this one in its handoff chain
	// spent.
	Inherited *Spent `json:"inherited,omitempty"`
	// Budget bounds what the run spends; SessionBudget what its session's
	// runs spend, of which SessionSpent was spent when the run started.
	Budget        *Budget `json:"budget,omitempty"`
	SessionBudget *Budget `json:"session_budget,omitempty"`
	SessionSpent  *Spent  `json:"session_spent,omitempty"`
	// Pause, when set, is the run's pause: asked for, or in effect; see
	// [Agent.Pause].
	Pause *PauseState `json:"pause,omitempty"`
	// Resumes counts the times the run was resumed from a pause in effect;
	// ResumedStep is the step the last resume let go on.
	Resumes     int `json:"resumes,omitempty"`
	ResumedStep int `json:"resumed_step,omitempty"`
	// SessionSaved reports that the run's messages were appended to its session.
	SessionSaved bool      `json:"session_saved,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
}

// MarshalJSON encodes the state as stored: without the history its
// session keeps (History) and the messages and tool calls archived
// (Archived, ArchivedCalls).
func (s runState) MarshalJSON() ([]byte, error) { return s.encode() }

// encode is MarshalJSON, which handlers call directly: json.Marshal
// would check the JSON a MarshalJSON method returns again.
func (s *runState) encode() ([]byte, error) {
	type stored runState // without the method
	tail, ok := s.Tail()
	calls := engine.CallsTail(&s.Transcript, s.ToolCalls)
	if !ok || (len(tail) == len(s.Messages) && len(calls) == len(s.ToolCalls)) {
		return json.Marshal((*stored)(s))
	}
	c := *s
	c.Messages, c.ToolCalls = tail, calls
	return json.Marshal((*stored)(&c))
}

// pendingCall is a tool call of the current step.
type pendingCall struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
	Result    *tool.Result `json:"result,omitempty"`
	Status    string       `json:"status,omitempty"`
	// Handoff is the handoff the call's result asks for, if any.
	Handoff *HandoffRequest `json:"handoff,omitempty"`
	// Hooks is what the agent's hooks decided about the call.
	Hooks []HookRecord `json:"hooks,omitempty"`
}

// ToolCallRecord is one tool call of a run and its result.
type ToolCallRecord struct {
	Step      int          `json:"step"`
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
	Status    string       `json:"status"`
	Result    *tool.Result `json:"result,omitempty"`
	// Handoff is the handoff the call's result asked for, if any.
	Handoff *HandoffRequest `json:"handoff,omitempty"`
	// Hooks is what the agent's hooks decided about the call, in order.
	Hooks []HookRecord `json:"hooks,omitempty"`
}

func (s *runState) pending(id string) *pendingCall {
	for i := range s.Pending {
		if s.Pending[i].ID == id {
			return &s.Pending[i]
		}
	}
	return nil
}

// answered reports whether s has the result of the call id of step: the
// call is pending with its result, or s has moved past the step, or the
// call's result ended the step (a handoff).
func (s *runState) answered(step int, id string) bool {
	p := s.pending(id)
	return runprogress.Answered(s.Step, s.AdvancedBy, p != nil && p.Result != nil, step, id)
}

func (s *runState) allAnswered() bool {
	for _, p := range s.Pending {
		if p.Result == nil {
			return false
		}
	}
	return true
}

// ErrCorruptState is returned when a stored record does not decode.
var ErrCorruptState = records.ErrCorrupt

// decodeRunState decodes a stored run state. It rejects data that is not a
// run state: a missing run id, agent, status or step.
func decodeRunState(data []byte) (*runState, error) {
	var s runState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: run: %v", ErrCorruptState, err)
	}
	if s.RunID == "" || s.Agent == "" {
		return nil, fmt.Errorf("%w: run: missing run id or agent", ErrCorruptState)
	}
	if err := s.Decoded(); err != nil {
		return nil, fmt.Errorf("%w: run %s: %v", ErrCorruptState, s.RunID, err)
	}
	if s.Step < 0 || s.HistoryLen < 0 || (!s.Bare() && s.HistoryLen > len(s.Messages)) {
		return nil, fmt.Errorf("%w: run %s: step %d, history %d of %d messages", ErrCorruptState, s.RunID, s.Step, s.HistoryLen, len(s.Messages))
	}
	switch s.Status {
	case RunRunning, RunComplete, RunFailed, RunCancelled, RunHandedOff:
	default:
		return nil, fmt.Errorf("%w: run %s: unknown status %q", ErrCorruptState, s.RunID, s.Status)
	}
	return &s, nil
}

// clone returns a copy of s that shares no mutable memory with it: slices
// are clipped so that appends reallocate, and the pending calls, which
// handlers change in place, are copied. It is how the run store's cache
// copies the states it keeps and hands out.
func (s *runState) clone() *runState {
	c := *s
	c.Messages = slices.Clip(s.Messages)
	c.ToolCalls = slices.Clip(s.ToolCalls)
	c.Pending = slices.Clone(s.Pending)
	return &c
}

// LoadRun returns the view of the run that run names, of any kind, or an
// error matching [store.ErrNotFound]: an agent's run (Kind "agent" or
// empty; its Name may be empty) as a [*RunInfo], whole, as [Agent.LoadRun]
// returns it; a team's or a workflow's run as its kind's view (see
// [RunKind]). A run that waits under flow control before it starts, and
// so has no record yet, is a [*QueuedRun] of status [RunQueued]. The
// view is the caller's: it shares nothing with what the runtime keeps.
func (rt *Runtime) LoadRun(ctx context.Context, run RunRef) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	v, err := rt.loadRecorded(ctx, run)
	if err != nil {
		return rt.queuedView(ctx, run, err)
	}
	return v, nil
}

// loadRecorded is LoadRun of a run that has a record of its kind: a
// queued run is not found. Flow control asks it whether a run has
// started: a queued run has not.
func (rt *Runtime) loadRecorded(ctx context.Context, run RunRef) (RunView, error) {
	if k, err := rt.runKind(run, "load"); k != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return k.Load(ctx, rt, run)
	}
	if run.RunID == "" {
		return nil, errors.New("agent: load a run: the run needs a run id")
	}
	return agentView(rt.loadRunInfo(ctx, run.RunID))
}

// LoadRun returns the view of the agent's run runID, whole (with the
// history its session keeps and the messages and tool calls archived
// apart from its record), or an error matching [store.ErrNotFound]. The
// view is the caller's: it shares nothing with what the runtime keeps.
func (a *Agent[Out]) LoadRun(ctx context.Context, rt *Runtime, runID string) (*RunInfo, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	return rt.loadRunInfo(ctx, runID)
}

// LoadAgentRun returns the view of the agent's run runID as
// [Agent.LoadRun] does, for a caller that knows the run's id alone.
func (rt *Runtime) LoadAgentRun(ctx context.Context, runID string) (*RunInfo, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	return rt.loadRunInfo(ctx, runID)
}

func (rt *Runtime) loadRunInfo(ctx context.Context, runID string) (*RunInfo, error) {
	st, err := rt.loadRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return st.info()
}

// detached returns a copy of s that shares no memory that could change
// with s, or with the copies the runtime keeps (the states and sessions it
// caches share messages, tool results and the rest): what an exported
// method hands to its caller, who may change it. It copies every field,
// through JSON.
func (s *runState) detached() (*runState, error) {
	if s == nil {
		return nil, nil
	}
	type full runState // every field, without MarshalJSON
	data, err := json.Marshal((*full)(s))
	if err != nil {
		return nil, fmt.Errorf("agent: copy the state of run %s: %w", s.RunID, err)
	}
	var c full
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("agent: copy the state of run %s: %w", s.RunID, err)
	}
	c.SetBare(s.Bare())
	return (*runState)(&c), nil
}

// loadRun is LoadRun for the runtime's own use: the state may share memory
// with the runtime's caches, and must not be changed in place (handlers
// change copies: see runstore.Cache).
func (rt *Runtime) loadRun(ctx context.Context, runID string) (*runState, error) {
	return rt.runs.Read(ctx, runID)
}

// readBack makes st, a bare state, whole: the history its session keeps
// and its archived messages go before its messages, its archived tool
// calls before its tool calls.
func (rt *Runtime) readBack(ctx context.Context, st *runState) error {
	if !st.Bare() {
		return nil
	}
	calls, err := runstore.ReadChunks[ToolCallRecord](ctx, rt.store, st.RunID, 'c', st.ArchivedCalls)
	if err != nil {
		return err
	}
	if err := st.ReadBack(ctx, rt.store, rt.sessions, st.RunID); err != nil {
		return err
	}
	st.ToolCalls = slices.Concat(calls, st.ToolCalls)
	return nil
}

// archive moves the first messages and tool calls of st's record to
// chunks while the record would hold 16 or more of either, before st is
// written (see engine.Transcript.ArchiveMessages).
func (rt *Runtime) archive(ctx context.Context, st *runState) error {
	if _, ok := st.Tail(); !ok {
		return nil
	}
	if err := st.ArchiveMessages(ctx, rt.store, st.RunID); err != nil {
		return err
	}
	for calls := engine.CallsTail(&st.Transcript, st.ToolCalls); len(calls) >= 2*runstore.Chunk; calls = engine.CallsTail(&st.Transcript, st.ToolCalls) {
		if err := runstore.PutChunk(ctx, rt.store, st.RunID, 'c', st.ArchivedCalls/runstore.Chunk, calls[:runstore.Chunk]); err != nil {
			return err
		}
		st.ArchivedCalls += runstore.Chunk
		if st.Bare() {
			st.ToolCalls = calls[runstore.Chunk:]
		}
	}
	return nil
}
