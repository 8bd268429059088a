package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// Role is what a member's call does for the team.
type Role string

// Roles of a call.
const (
	// RoleMember: a member works on the task (or speaks in a group chat).
	RoleMember Role = "member"
	// RoleModerator: a moderator agent picks the next speaker.
	RoleModerator Role = "moderator"
	// RoleAggregator: an aggregator agent combines the members' answers.
	RoleAggregator Role = "aggregator"
	// RoleManager: a manager agent delegates to the members and answers.
	RoleManager Role = "manager"
	// RoleEntry: the entry agent of a swarm takes the task first.
	RoleEntry Role = "entry"
)

// memberCall is one member run of the current step, as the team records
// it before starting it.
type memberCall struct {
	Member string `json:"member"`
	Role   Role   `json:"role"`
	RunID  string `json:"run_id"`
	Prompt string `json:"prompt"`
	// Deadline, when set, bounds the run (Options.MemberTimeout).
	Deadline time.Time `json:"deadline,omitzero"`
	// Submitted reports that the run was started: a step delivered again
	// does not start it again.
	Submitted bool `json:"submitted,omitempty"`
	// Done reports that the run's reply has arrived; then Output or Error
	// holds what it said.
	Done   bool   `json:"done,omitempty"`
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// AnsweredBy names the agent that answered when it is not the member:
	// the last agent of a handoff chain.
	AnsweredBy string `json:"answered_by,omitempty"`
}

// Turn is one finished call in a team run's transcript.
type Turn struct {
	// Step is the team step the call belonged to, from 1.
	Step   int    `json:"step"`
	Member string `json:"member"`
	Role   Role   `json:"role"`
	RunID  string `json:"run_id"`
	// Content is the member's output; empty when the run failed.
	Content string `json:"content,omitempty"`
	// Error explains a member run that failed or was cancelled.
	Error string `json:"error,omitempty"`
	// AnsweredBy names the agent that answered when it is not the member:
	// in a swarm, the agent the conversation was handed off to last.
	AnsweredBy string `json:"answered_by,omitempty"`
}

// Failed reports whether the member's run did not complete.
func (t Turn) Failed() bool { return t.Error != "" }

// runState is the stored state of one team run: where it stands and
// everything its members said. It is saved under store.KindTeam with the
// run id, and changed only by compare-and-swap. Its JSON is a stored
// format: records written by earlier versions (testdata/records) must
// still decode, so a new field is omitempty.
type runState struct {
	RunID   string          `json:"run_id"`
	Team    string          `json:"team"`
	Process Process         `json:"process"`
	Status  agent.RunStatus `json:"status"`
	// Task is the run's input.
	Task string `json:"task"`
	// Step counts the batches of member runs, from 1; Calls are those of
	// the current step.
	Step  int          `json:"step"`
	Calls []memberCall `json:"calls,omitempty"`
	// Transcript holds every finished call, in order.
	Transcript []Turn `json:"transcript,omitempty"`
	// AdvancedBy is the member run whose reply completed the previous step.
	AdvancedBy string `json:"advanced_by,omitempty"`
	// Output is the team's answer; Error explains a failed or cancelled run.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Usage adds up the usage of every member run, and Cost their cost.
	Usage     model.Usage    `json:"usage"`
	Cost      model.Cost     `json:"cost"`
	ReplyTo   *agent.ReplyTo `json:"reply_to,omitempty"`
	Parent    string         `json:"parent,omitempty"`
	SessionID string         `json:"session_id,omitempty"`
	Stream    bool           `json:"stream,omitempty"`
	StartedAt time.Time      `json:"started_at"`
	EndedAt   time.Time      `json:"ended_at,omitzero"`
	// Pause, when set, is the run's pause: asked for, or in effect; see
	// Team.Pause.
	Pause *agent.PauseState `json:"pause,omitempty"`
	// Resumes counts the times the run was resumed from a pause in effect,
	// and ResumedStep is the step the last of them let go on. Until a
	// member run of that step has started, the resume's events may not
	// all have been sent: Resume called again and Recover send them again,
	// with the same ids (see pause.go).
	Resumes     int `json:"resumes,omitempty"`
	ResumedStep int `json:"resumed_step,omitempty"`
	// Budget, when set, bounds what the run's member runs spend: each
	// gets what is left of it once Usage and Cost are counted.
	Budget *agent.Budget `json:"budget,omitempty"`
}

// decodeRunState decodes a stored team state, rejecting data that is not
// one.
func decodeRunState(data []byte) (*runState, error) {
	var s runState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: team: %v", agent.ErrCorruptState, err)
	}
	if s.RunID == "" || s.Team == "" || s.Step < 0 {
		return nil, fmt.Errorf("%w: team: missing run id or team", agent.ErrCorruptState)
	}
	switch s.Status {
	case agent.RunRunning, agent.RunComplete, agent.RunFailed, agent.RunCancelled:
	default:
		return nil, fmt.Errorf("%w: team run %s: unknown status %q", agent.ErrCorruptState, s.RunID, s.Status)
	}
	return &s, nil
}

// loadRunState returns the stored state of a team run, or an error
// matching store.ErrNotFound.
func loadRunState(ctx context.Context, rt *agent.Runtime, runID string) (*runState, error) {
	if rt == nil {
		return nil, fmt.Errorf("team: load run %s: %w", runID, agent.ErrNoRuntime)
	}
	rec, err := rt.Store().Get(ctx, store.KindTeam, runID)
	if err != nil {
		return nil, fmt.Errorf("team: load run %s: %w", runID, err)
	}
	return decodeRunState(rec.Data)
}

func (s *runState) call(runID string) *memberCall {
	for i := range s.Calls {
		if s.Calls[i].RunID == runID {
			return &s.Calls[i]
		}
	}
	return nil
}

// childBudget returns the budget of a member run started now: what is
// left of the run's budget once the member runs that have answered are
// counted, or nil for a run without one.
func (s *runState) childBudget() *agent.Budget {
	if s.Budget == nil {
		return nil
	}
	return s.Budget.Remaining(agent.Spent{Usage: s.Usage, Cost: s.Cost})
}

func (s *runState) allDone() bool {
	for _, c := range s.Calls {
		if !c.Done {
			return false
		}
	}
	return true
}

// plan starts the next step with calls.
func (s *runState) plan(calls ...memberCall) {
	s.Step++
	for i := range calls {
		calls[i].RunID = childRunID(s.RunID, s.Step, calls[i].Member)
	}
	s.Calls = calls
}

func (s *runState) complete(output string, now time.Time) {
	s.Status, s.Output, s.Calls, s.EndedAt = agent.RunComplete, output, nil, now
}

func (s *runState) fail(reason string, now time.Time) {
	s.Status, s.Error, s.Calls, s.EndedAt = agent.RunFailed, reason, nil, now
}

// update applies fn to a stored team state with a compare-and-swap. fn
// reports whether it changed the state; the state it saw is returned.
func update(ctx context.Context, s store.Store, id string, fn func(st *runState) (bool, error)) (*runState, error) {
	var out *runState
	_, err := store.Update(ctx, s, store.KindTeam, id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("team: run %s: %w", id, store.ErrNotFound)
		}
		st, err := decodeRunState(data)
		if err != nil {
			return nil, err
		}
		changed, err := fn(st)
		out = st
		if err != nil || !changed {
			return nil, err
		}
		return json.Marshal(st)
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, agent.ErrCorruptState) {
		return nil, permanent(err)
	}
	return out, err
}
