package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/calf-go/calf"
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
	// (RunState.HandedOffTo), which answers in its place.
	RunHandedOff RunStatus = "handed_off"
)

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool {
	return s == RunComplete || s == RunFailed || s == RunCancelled || s == RunHandedOff
}

// Phase says what a running run waits for.
type Phase string

// Run phases.
const (
	// PhaseInference: the model call of the current step is due.
	PhaseInference Phase = "inference"
	// PhaseTools: the model answered with tool calls; their results are due.
	PhaseTools Phase = "tools"
)

// RunState is the stored state of one run: everything a handler on any
// worker needs to take the next step. It is saved under
// [store.KindRun] with the run id.
type RunState struct {
	RunID     string    `json:"run_id"`
	Agent     string    `json:"agent"`
	SessionID string    `json:"session_id,omitempty"`
	Status    RunStatus `json:"status"`
	Phase     Phase     `json:"phase,omitempty"`
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
	// such a record ([DecodeRunState]) holds only the run's messages until
	// its history is read back; [Runtime.LoadRun] returns it whole.
	History *HistoryRef `json:"history,omitempty"`
	// Compacted, when set, is what the model sees in place of the first
	// messages of Messages; see [Compaction].
	Compacted *CompactedContext `json:"compacted,omitempty"`
	// LastInput is the size of the input of the run's last model call, as
	// the model reported it, and how many messages (of what the model
	// sees, the instructions left out) it had.
	LastInput *InputSize `json:"last_input,omitempty"`
	// Pending are the tool calls of the current step, with their results
	// as they arrive.
	Pending []PendingCall `json:"pending,omitempty"`
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
	Root *RootRun `json:"root,omitempty"`
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
	// [Runtime.Pause].
	Pause *PauseState `json:"pause,omitempty"`
	// Resumes counts the times the run was resumed from a pause in effect.
	Resumes int `json:"resumes,omitempty"`
	// SessionSaved reports that the run's messages were appended to its session.
	SessionSaved bool      `json:"session_saved,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`

	// bare reports that History is set and Messages holds only the run's
	// own messages: the history is not read back yet.
	bare bool
}

// HistoryRef names the history a run started from when its session keeps
// it: the session's first messages, as many as the run's HistoryLen.
type HistoryRef struct {
	// Session is the session whose messages the history is.
	Session string `json:"session"`
	// Epoch is the session's epoch when the run started: a session
	// replaced since (saved over, imported over, deleted and created
	// again) has another, and no longer holds the history.
	Epoch string `json:"epoch,omitempty"`
}

// MarshalJSON encodes the state as stored: when the session keeps the
// run's history (History is set), without it.
func (s RunState) MarshalJSON() ([]byte, error) { return s.encode() }

// encode is MarshalJSON, which handlers call directly: json.Marshal
// would check the JSON a MarshalJSON method returns again.
func (s *RunState) encode() ([]byte, error) {
	type stored RunState // without the method
	if s.History == nil || s.bare || s.HistoryLen > len(s.Messages) {
		return json.Marshal((*stored)(s))
	}
	c := *s
	c.Messages = s.Messages[s.HistoryLen:]
	return json.Marshal((*stored)(&c))
}

// Bare reports whether the state holds only the run's own messages, its
// history (kept in its session, see [RunState.History]) not read back.
func (s *RunState) Bare() bool { return s.bare }

// InputSize is the size of a model call's input.
type InputSize struct {
	Tokens   int `json:"tokens"`
	Messages int `json:"messages"`
}

// PendingCall is a tool call of the current step.
type PendingCall struct {
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

// NewMessages returns the messages this run added to its session's history.
func (s *RunState) NewMessages() []model.Message {
	if s.bare {
		return s.Messages
	}
	if s.HistoryLen > len(s.Messages) {
		return nil
	}
	return s.Messages[s.HistoryLen:]
}

func (s *RunState) pending(id string) *PendingCall {
	for i := range s.Pending {
		if s.Pending[i].ID == id {
			return &s.Pending[i]
		}
	}
	return nil
}

func (s *RunState) allAnswered() bool {
	for _, p := range s.Pending {
		if p.Result == nil {
			return false
		}
	}
	return true
}

// ErrCorruptState is returned when a stored record does not decode.
var ErrCorruptState = errors.New("agent: corrupt stored state")

// DecodeRunState decodes a stored run state. It rejects data that is not a
// run state: a missing run id, agent, status or step.
func DecodeRunState(data []byte) (*RunState, error) {
	var s RunState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: run: %v", ErrCorruptState, err)
	}
	s.bare = s.History != nil
	switch {
	case s.RunID == "" || s.Agent == "":
		return nil, fmt.Errorf("%w: run: missing run id or agent", ErrCorruptState)
	case s.History != nil && (s.History.Session == "" || s.HistoryLen <= 0):
		return nil, fmt.Errorf("%w: run %s: a history of %d messages in session %q", ErrCorruptState, s.RunID, s.HistoryLen, s.History.Session)
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

// LoadRun returns the stored state of a run, with its history, or an
// error matching [store.ErrNotFound].
func (rt *Runtime) LoadRun(ctx context.Context, runID string) (*RunState, error) {
	rec, err := rt.store.Get(ctx, store.KindRun, runID)
	if err != nil {
		return nil, fmt.Errorf("agent: load run %s: %w", runID, err)
	}
	st, err := rt.states.decode(runID, rec.Data, rec.Version)
	if err != nil {
		return nil, err
	}
	if err := rt.withHistory(ctx, st, rec); err != nil {
		return nil, err
	}
	return st, nil
}

// withHistory reads back the history of st, a state decoded from rec,
// when its session keeps it, and caches the whole state.
func (rt *Runtime) withHistory(ctx context.Context, st *RunState, rec store.Record) error {
	if !st.bare {
		return nil
	}
	if err := rt.readHistory(ctx, st); err != nil {
		return err
	}
	rt.states.put(st.RunID, rec.Data, rec.Version, st)
	return nil
}

// readHistory puts the history of st, a bare state, before its messages.
func (rt *Runtime) readHistory(ctx context.Context, st *RunState) error {
	if !st.bare {
		return nil
	}
	ref := st.History
	r, _, err := rt.sessionRecord(ctx, ref.Session)
	if errors.Is(err, store.ErrNotFound) {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was in session %s, which is gone", ErrCorruptState, st.RunID, ref.Session))
	}
	if err != nil {
		return err
	}
	if r.Epoch != ref.Epoch || r.Count < st.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was the first %d messages of session %s, which was replaced since", ErrCorruptState, st.RunID, st.HistoryLen, ref.Session))
	}
	msgs, err := rt.sessionMessages(ctx, r)
	if err != nil {
		return err
	}
	if len(msgs) < st.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: session %s holds %d messages of its history of %d", ErrCorruptState, st.RunID, ref.Session, len(msgs), st.HistoryLen))
	}
	st.Messages = slices.Concat(msgs[:st.HistoryLen:st.HistoryLen], st.Messages)
	st.bare = false
	return nil
}
