package team

import (
	"context"
	"slices"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// RunInfo is what a team run tells its readers: a read-only view of one
// run, made from its stored record. [Team.LoadRun] reads it from a runtime's
// store; [DecodeRunInfo] makes it from a record alone. It is a copy: it
// shares nothing with the runtime, and changing it changes nothing.
//
// The record itself, with what the coordinator keeps to take the run's
// next step, is not part of the API: it changes with the run protocol,
// and its stored JSON stays readable by later versions.
type RunInfo struct {
	// ID identifies the run; Team is the team it belongs to, Process the
	// team's process.
	ID      string          `json:"id"`
	Team    string          `json:"team"`
	Process Process         `json:"process"`
	Status  agent.RunStatus `json:"status"`
	// Task is the run's input.
	Task string `json:"task"`
	// Step counts the run's batches of member runs, from 1.
	Step int `json:"step"`
	// Transcript holds every member run that finished, in order.
	Transcript []Turn `json:"transcript,omitempty"`
	// Current lists the member runs of the current step while the run
	// has not ended: those that have answered are in Transcript once the
	// step ends.
	Current []MemberRun `json:"current,omitempty"`
	// Output is a completed run's answer; Error explains a failed or
	// cancelled run.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Usage and Cost add up the usage and cost of the member runs.
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
	// Parent is the run that started this one (an agent, a team or a
	// workflow), if any; SessionID the conversation the run belongs to.
	Parent    string `json:"parent,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Paused reports that the run's pause is in effect: it waits for
	// [Team.Resume]. Pause, when set, is the pause asked for or in
	// effect.
	Paused    bool              `json:"paused,omitempty"`
	Pause     *agent.PauseState `json:"pause,omitempty"`
	StartedAt time.Time         `json:"started_at"`
	EndedAt   time.Time         `json:"ended_at,omitzero"`
	// Budget is the run's budget, if it has one (see [RunOptions.Budget]).
	Budget *agent.Budget `json:"budget,omitempty"`
}

// MemberRun is a member run of a team run's current step, in
// [RunInfo.Current].
type MemberRun struct {
	// Member is the member's name, Role what its run does for the team,
	// RunID its run's id and Prompt its input.
	Member string `json:"member"`
	Role   Role   `json:"role"`
	RunID  string `json:"run_id"`
	Prompt string `json:"prompt"`
	// Started reports that the run was started; Done that its answer
	// arrived.
	Started bool `json:"started,omitempty"`
	Done    bool `json:"done,omitempty"`
	// Deadline, when set, bounds the run (Options.MemberTimeout).
	Deadline time.Time `json:"deadline,omitzero"`
}

// LoadRun returns the view of the team's run runID, or an error matching
// [store.ErrNotFound] (a run of another team among them). A nil rt is an
// error matching [agent.ErrNoRuntime]. [agent.Runtime.LoadRun] does the
// same for a team known by name.
func (t *Team) LoadRun(ctx context.Context, rt *agent.Runtime, runID string) (*RunInfo, error) {
	v, err := Kind.Load(ctx, rt, t.ref(runID))
	if err != nil {
		return nil, err
	}
	return v.(*RunInfo), nil
}

// DecodeRunInfo makes the view of a team run from its stored record (a
// record of kind [store.KindTeam]). It rejects data that is not a team
// run's record with an error matching [agent.ErrCorruptState].
func DecodeRunInfo(data []byte) (*RunInfo, error) {
	st, err := decodeRunState(data)
	if err != nil {
		return nil, err
	}
	return st.info(), nil
}

// info returns the view of s, a copy that shares nothing with it.
func (s *runState) info() *RunInfo {
	r := &RunInfo{
		ID: s.RunID, Team: s.Team, Process: s.Process, Status: s.Status, Task: s.Task, Step: s.Step,
		Transcript: slices.Clone(s.Transcript), Output: s.Output, Error: s.Error,
		Usage: s.Usage, Cost: s.Cost, Parent: s.Parent, SessionID: s.SessionID,
		Paused: s.Paused(), StartedAt: s.StartedAt, EndedAt: s.EndedAt,
	}
	r.Cost.Unpriced = slices.Clone(r.Cost.Unpriced)
	if s.Pause != nil {
		p := *s.Pause
		r.Pause = &p
	}
	if s.Budget != nil {
		b := *s.Budget
		r.Budget = &b
	}
	if !s.Status.Terminal() {
		for _, c := range s.Calls {
			r.Current = append(r.Current, MemberRun{Member: c.Member, Role: c.Role, RunID: c.RunID, Prompt: c.Prompt,
				Started: c.Submitted || c.Done, Done: c.Done, Deadline: c.Deadline})
		}
	}
	return r
}
