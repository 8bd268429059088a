package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/agent/internal/runprogress"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
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
)

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool { return runprogress.Terminal(string(s)) }

// runPhase says what a running run waits for.
type runPhase string

// Run phases.
const (
	// phaseInference: the model call of the current step is due.
	phaseInference runPhase = "inference"
	// phaseTools: the model answered with tool calls; their results are due.
	phaseTools runPhase = "tools"
)

// runState is the stored state of one run: everything a handler on any
// worker needs to take the next step. It is saved under
// [store.KindRun] with the run id. It is not part of the API (readers get
// a [RunInfo]), but its JSON is a stored format: records written by
// earlier versions must decode (testdata/records, TestStoredRecords), so
// a field is added, never renamed or given another meaning.
type runState struct {
	RunID     string    `json:"run_id"`
	Agent     string    `json:"agent"`
	SessionID string    `json:"session_id,omitempty"`
	Status    RunStatus `json:"status"`
	Phase     runPhase  `json:"phase,omitempty"`
	// Step is the current model call, from 1.
	Step int `json:"step"`
	// Messages is the conversation without the system prompt: the session's
	// history, then this run's messages.
	Messages []model.Message `json:"messages"`
	// HistoryLen is how many of Messages came from the session.
	HistoryLen int `json:"history_len,omitempty"`
	// History, when set, says that the first HistoryLen messages are the
	// start of the run's session, kept there and not in the run's record:
	// the record holds the run's own messages only, so that what a step
	// writes does not grow with the session's length. A state decoded from
	// such a record (decodeRunState) holds only the run's messages until
	// its history is read back; [Runtime.LoadRun] returns it whole.
	History *historyRef `json:"history,omitempty"`
	// Archived is how many of the messages the run's record would hold
	// (the run's own, or, for a history kept in the record, the history's
	// and the run's) are kept in run_messages records instead
	// (runstore.KindRunMessages), 8 to a record, written once each: the
	// record holds the rest, at most 15,
	// so that a step of a long run writes what it added, not the whole
	// conversation again. A state decoded from such a record holds those
	// last messages only until the others are read back; [Runtime.LoadRun]
	// returns it whole.
	Archived int `json:"archived,omitempty"`
	// ArchivedCalls is how many of ToolCalls are kept in run_messages
	// records, 8 to a record, as Archived is for the messages.
	ArchivedCalls int `json:"archived_calls,omitempty"`
	// Compacted, when set, is what the model sees in place of the first
	// messages of Messages; see [Options.Compaction].
	Compacted *compaction.Record `json:"compacted,omitempty"`
	// LastInput is the size of the input of the run's last model call, as
	// the model reported it, and how many messages (of what the model
	// sees, the instructions left out) it had.
	LastInput *inputSize `json:"last_input,omitempty"`
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
	// ReplyTo is where the output goes when the run ends, besides the
	// agent's output channel.
	ReplyTo *ReplyTo `json:"reply_to,omitempty"`
	// Parent is the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Correlation is the correlation id of the run's events when it is not
	// the run id: the runs of a handoff chain share the first one's.
	Correlation string `json:"correlation,omitempty"`
	// Chain lists the runs that handed off, one to the next, to reach this
	// run, oldest first.
	Chain []Hop `json:"chain,omitempty"`
	// HandedOffTo is the run that continues a run that handed off.
	HandedOffTo *Hop `json:"handed_off_to,omitempty"`
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

	// bare reports that Messages and ToolCalls hold only what the run's
	// record holds: the history kept in the session (History) and the
	// archived messages and tool calls are not read back yet.
	bare bool
}

// historyRef names the history a run started from when its session keeps
// it: the session's first messages, as many as the run's HistoryLen.
type historyRef struct {
	// Session is the session whose messages the history is.
	Session string `json:"session"`
	// Epoch is the session's epoch when the run started: a session
	// replaced since (saved over, imported over, deleted and created
	// again) has another, and no longer holds the history.
	Epoch string `json:"epoch,omitempty"`
}

// MarshalJSON encodes the state as stored: without the history its
// session keeps (History) and the messages and tool calls archived
// (Archived, ArchivedCalls).
func (s runState) MarshalJSON() ([]byte, error) { return s.encode() }

// encode is MarshalJSON, which handlers call directly: json.Marshal
// would check the JSON a MarshalJSON method returns again.
func (s *runState) encode() ([]byte, error) {
	type stored runState // without the method
	tail, ok := s.tail()
	calls := s.callsTail()
	if !ok || (len(tail) == len(s.Messages) && len(calls) == len(s.ToolCalls)) {
		return json.Marshal((*stored)(s))
	}
	c := *s
	c.Messages, c.ToolCalls = tail, calls
	return json.Marshal((*stored)(&c))
}

// callsTail returns the tool call records the run's record holds: those
// after the archived ones.
func (s *runState) callsTail() []ToolCallRecord {
	if s.bare || s.ArchivedCalls > len(s.ToolCalls) {
		return s.ToolCalls
	}
	return s.ToolCalls[s.ArchivedCalls:]
}

// tail returns the messages the run's record holds: those after the
// session's history and the archived ones. ok is false for a state whose
// counts do not fit its messages, which is encoded as it is.
func (s *runState) tail() (msgs []model.Message, ok bool) {
	if s.bare {
		return s.Messages, true
	}
	skip := s.Archived
	if s.History != nil {
		skip += s.HistoryLen
	}
	if skip > len(s.Messages) {
		return nil, false
	}
	return s.Messages[skip:], true
}

// Bare reports whether the state holds only the messages its run's record
// holds: its history (kept in its session, see runState.History) and
// its archived messages (runState.Archived) not read back.
func (s *runState) Bare() bool { return s.bare }

// inputSize is the size of a model call's input.
type inputSize struct {
	Tokens   int `json:"tokens"`
	Messages int `json:"messages"`
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

// NewMessages returns the messages this run added to its session's
// history. Of a bare state (runState.Bare) whose messages were archived
// in part, it returns those its record holds.
func (s *runState) NewMessages() []model.Message {
	if s.bare {
		return s.Messages
	}
	if s.HistoryLen > len(s.Messages) {
		return nil
	}
	return s.Messages[s.HistoryLen:]
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
	s.bare = s.History != nil || s.Archived > 0 || s.ArchivedCalls > 0
	switch {
	case s.RunID == "" || s.Agent == "":
		return nil, fmt.Errorf("%w: run: missing run id or agent", ErrCorruptState)
	case s.History != nil && (s.History.Session == "" || s.HistoryLen <= 0):
		return nil, fmt.Errorf("%w: run %s: a history of %d messages in session %q", ErrCorruptState, s.RunID, s.HistoryLen, s.History.Session)
	case s.Archived < 0 || s.Archived%runstore.Chunk != 0 || s.ArchivedCalls < 0 || s.ArchivedCalls%runstore.Chunk != 0:
		return nil, fmt.Errorf("%w: run %s: %d archived messages, %d archived tool calls", ErrCorruptState, s.RunID, s.Archived, s.ArchivedCalls)
	case s.Step < 0 || s.HistoryLen < 0 || (!s.bare && s.HistoryLen > len(s.Messages)):
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
// [RunKind]). The view is the caller's: it shares nothing with what the
// runtime keeps.
func (rt *Runtime) LoadRun(ctx context.Context, run RunRef) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
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
	c.bare = s.bare
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
	if !st.bare {
		return nil
	}
	archived, err := runstore.ReadChunks[model.Message](ctx, rt.store, st.RunID, 'm', st.Archived)
	if err != nil {
		return err
	}
	calls, err := runstore.ReadChunks[ToolCallRecord](ctx, rt.store, st.RunID, 'c', st.ArchivedCalls)
	if err != nil {
		return err
	}
	st.ToolCalls = slices.Concat(calls, st.ToolCalls)
	if st.History == nil {
		st.Messages = slices.Concat(archived, st.Messages)
		st.bare = false
		return nil
	}
	ref := st.History
	r, _, err := rt.sessions.Get(ctx, ref.Session)
	if errors.Is(err, store.ErrNotFound) {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was in session %s, which is gone", ErrCorruptState, st.RunID, ref.Session))
	}
	if err != nil {
		return err
	}
	if r.Epoch != ref.Epoch || r.Count < st.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was the first %d messages of session %s, which was replaced since", ErrCorruptState, st.RunID, st.HistoryLen, ref.Session))
	}
	msgs, err := rt.sessions.Messages(ctx, r)
	if err != nil {
		return err
	}
	if len(msgs) < st.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: session %s holds %d messages of its history of %d", ErrCorruptState, st.RunID, ref.Session, len(msgs), st.HistoryLen))
	}
	st.Messages = slices.Concat(msgs[:st.HistoryLen:st.HistoryLen], archived, st.Messages)
	st.bare = false
	return nil
}

// archive moves the first messages of st's record to chunks while the
// record would hold 16 or more, before st is written. A chunk's content is
// the same whoever writes it (a run's messages only grow at their end), so
// a write whose compare-and-swap then conflicts leaves a chunk the next
// attempt writes again, the same.
func (rt *Runtime) archive(ctx context.Context, st *runState) error {
	tail, ok := st.tail()
	if !ok {
		return nil
	}
	for len(tail) >= 2*runstore.Chunk {
		if err := runstore.PutChunk(ctx, rt.store, st.RunID, 'm', st.Archived/runstore.Chunk, tail[:runstore.Chunk]); err != nil {
			return err
		}
		st.Archived += runstore.Chunk
		tail = tail[runstore.Chunk:]
		if st.bare {
			st.Messages = tail
		}
	}
	for calls := st.callsTail(); len(calls) >= 2*runstore.Chunk; calls = st.callsTail() {
		if err := runstore.PutChunk(ctx, rt.store, st.RunID, 'c', st.ArchivedCalls/runstore.Chunk, calls[:runstore.Chunk]); err != nil {
			return err
		}
		st.ArchivedCalls += runstore.Chunk
		if st.bare {
			st.ToolCalls = calls[runstore.Chunk:]
		}
	}
	return nil
}
