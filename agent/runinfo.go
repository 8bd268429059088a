package agent

import (
	"encoding/json"
	"time"

	"github.com/calf-go/calf/model"
)

// RunInfo is what a run tells its readers: a read-only view of one run of
// an agent, made from its stored record. [Agent.LoadRun] returns it
// whole; [DecodeRunInfo] makes it from a record alone. It is a copy: it
// shares nothing with the runtime, and changing it changes nothing.
//
// The record itself, with what the handlers keep to take a run's next
// step, is not part of the API: it changes with the run protocol, and its
// stored JSON stays readable by later versions.
type RunInfo struct {
	// ID identifies the run; Agent is the agent it belongs to.
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// SessionID is the conversation the run continues, if any.
	SessionID string `json:"session_id,omitempty"`
	// Parent is the run that started this one (a subagent's caller, a
	// team or a workflow), if any.
	Parent string    `json:"parent,omitempty"`
	Status RunStatus `json:"status"`
	// Step is the model call the run is at (or ended at), from 1; 0 for a
	// run that has not begun.
	Step int `json:"step"`
	// Paused reports that the run's pause is in effect: it waits for
	// [Agent.Resume]. Pause, when set, is the pause asked for or in
	// effect.
	Paused bool        `json:"paused,omitempty"`
	Pause  *PauseState `json:"pause,omitempty"`
	// Messages is the conversation without the system prompt: the
	// session's history (the first HistoryLen), then the run's own
	// messages. Of a RunInfo made from a record alone whose run kept part
	// of them apart from its record (Partial), they are the last ones.
	Messages   []model.Message `json:"messages"`
	HistoryLen int             `json:"history_len,omitempty"`
	// ToolCalls are the run's tool calls with their results, in order.
	ToolCalls []ToolCallRecord `json:"tool_calls,omitempty"`
	// Partial reports a RunInfo made from the run's record alone
	// ([DecodeRunInfo]) whose messages and tool calls are not all there:
	// the record keeps the session's history in the session and the
	// older messages and tool calls in records of their own.
	// [Runtime.LoadRun] reads them all.
	Partial bool `json:"partial,omitempty"`
	// Own is how many messages the run added to its session's history,
	// those kept apart from the record included: all of its own messages,
	// of which an agent with [Options.SessionAnswersOnly] gives its session
	// only the input and the answer.
	Own int `json:"own"`
	// Output is a completed run's output: JSON text for a structured
	// output, a JSON string for text.
	Output json.RawMessage `json:"output,omitempty"`
	// Error explains a failed or cancelled run.
	Error string `json:"error,omitempty"`
	// Guardrail is the guardrail that ended the run, if one did.
	Guardrail *GuardrailTrip `json:"guardrail,omitempty"`
	// Usage and Cost count the run's model calls, with those of the runs
	// it started (subagents). Inherited is what the runs before it in its
	// handoff chain spent.
	Usage     model.Usage `json:"usage"`
	Cost      model.Cost  `json:"cost"`
	Inherited *Spent      `json:"inherited,omitempty"`
	// Chain lists the runs that handed off, one to the next, to reach this
	// run, oldest first; HandedOffTo is the run that continues this one
	// when it handed off.
	Chain       []Hop `json:"chain,omitempty"`
	HandedOffTo *Hop  `json:"handed_off_to,omitempty"`
	// Budget is the run's budget, if it has one.
	Budget *Budget `json:"budget,omitempty"`
	// Deadline, when set, ends the run at the first step after it.
	Deadline  time.Time `json:"deadline,omitzero"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// NewMessages returns the messages the run added to its session's
// history (those of Messages after HistoryLen).
func (r *RunInfo) NewMessages() []model.Message {
	if r.HistoryLen > len(r.Messages) {
		return nil
	}
	return r.Messages[r.HistoryLen:]
}

// DecodeRunInfo makes the view of a run from its stored record (a record
// of kind [store.KindRun]), without reading anything else: its messages
// and tool calls may be the last ones only (RunInfo.Partial). It rejects
// data that is not a run's record with an error matching
// [ErrCorruptState].
func DecodeRunInfo(data []byte) (*RunInfo, error) {
	st, err := decodeRunState(data)
	if err != nil {
		return nil, err
	}
	return st.info()
}

// info returns the view of s, a copy that shares nothing with it.
func (s *runState) info() (*RunInfo, error) {
	c, err := s.detached()
	if err != nil {
		return nil, err
	}
	r := &RunInfo{
		ID: c.RunID, Agent: c.Agent, SessionID: c.SessionID, Parent: c.Parent, Status: c.Status, Step: c.Step,
		Paused: c.Paused(), Pause: c.Pause,
		Messages: c.Messages, HistoryLen: c.HistoryLen, ToolCalls: c.ToolCalls, Partial: c.Bare(),
		Output: c.Output, Error: c.Error, Guardrail: c.Guardrail,
		Usage: c.Usage, Cost: c.Cost, Inherited: c.Inherited, Chain: hops(c.Chain), HandedOffTo: (*Hop)(c.HandedOffTo),
		Budget: c.Budget, Deadline: c.Deadline, StartedAt: c.StartedAt, EndedAt: c.EndedAt,
	}
	// The run's own messages: of a whole state, those after the history;
	// of a record, those it holds after the history it holds (none when
	// the session keeps it), and those archived.
	r.Own = max(0, len(c.Messages)-c.HistoryLen)
	if c.Bare() {
		held := max(0, c.HistoryLen-c.Archived) // the history's messages the record holds
		if c.History != nil {
			held = 0
		}
		r.HistoryLen = min(held, len(c.Messages))
		r.Own = len(c.Messages) - r.HistoryLen + max(0, c.Archived-c.HistoryLen)
		if c.History != nil {
			r.Own = len(c.Messages) + c.Archived
		}
	}
	if r.Messages == nil {
		r.Messages = []model.Message{}
	}
	return r, nil
}
