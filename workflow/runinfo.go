package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// RunInfo is what a workflow run tells its readers: a read-only view of
// one run, made from its stored record. [Workflow.LoadRun] reads it from
// a runtime's store; [DecodeRunInfo] makes it from a record alone, without
// the workflow's definition. It is a copy: it shares nothing with the
// runtime, and changing it changes nothing.
//
// The state is JSON, as the run stored it: decode it into the workflow's
// state type (json.Unmarshal), or read the run's checkpoints typed with
// [Workflow.Checkpoints]. The record itself, with what the handlers keep
// to take the run's next step, is not part of the API: it changes with
// the run protocol, and its stored JSON stays readable by later versions.
type RunInfo struct {
	// ID identifies the run; Workflow is the workflow it belongs to.
	ID       string    `json:"id"`
	Workflow string    `json:"workflow"`
	Status   RunStatus `json:"status"`
	// Position is where the run is: its step, and the node (or the
	// parallel step) that step runs; End once the run is complete.
	Position
	// State is the state the current step runs on, the state of the last
	// checkpoint, as JSON; of a complete run, its final state.
	State json.RawMessage `json:"state"`
	// Checkpoint is the number of the last checkpoint, from 0 (the
	// input), and CheckpointAt when it was taken; LastStep and LastNode
	// name what it completed (for a parallel step, the branches joined by
	// commas).
	Checkpoint   int       `json:"checkpoint"`
	CheckpointAt time.Time `json:"checkpoint_at"`
	LastStep     int       `json:"last_step,omitempty"`
	LastNode     string    `json:"last_node,omitempty"`
	// BranchesDone lists the branches of the current parallel step that
	// have finished.
	BranchesDone []string `json:"branches_done,omitempty"`
	// Interrupts counts the run's interrupts; Interrupt describes the
	// current one while the run is interrupted (see [Workflow.Answer]).
	Interrupts int            `json:"interrupts,omitempty"`
	Interrupt  *InterruptInfo `json:"interrupt,omitempty"`
	// Error explains a failed or cancelled run; ErrorKind classifies some
	// failures ([ErrorKindLimit]).
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
	// From names the checkpoint a forked run started from ([Workflow.Fork]).
	From *ForkFrom `json:"from,omitempty"`
	// Parent is the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Paused reports that the run's pause is in effect: it waits for
	// [Workflow.Resume] before the step Step. Pause, when set, is the
	// pause asked for or in effect.
	Paused bool              `json:"paused,omitempty"`
	Pause  *agent.PauseState `json:"pause,omitempty"`
	// Usage and Cost add up the runs of the workflow's agent nodes.
	Usage     model.Usage `json:"usage"`
	Cost      model.Cost  `json:"cost"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at,omitzero"`
	// Budget is the run's budget, if it has one (see [RunOptions.Budget]).
	Budget *agent.Budget `json:"budget,omitempty"`
	// SleepingUntil, while a node's [SleepError] holds the run, is when
	// its step Step starts.
	SleepingUntil time.Time `json:"sleeping_until,omitzero"`
	// WaitingFor, while a node of the run's step waits for a signal
	// ([WaitSignal]), is the signal's name, and WaitUntil, when the wait
	// has a timeout, when it times out.
	WaitingFor string    `json:"waiting_for,omitempty"`
	WaitUntil  time.Time `json:"wait_until,omitzero"`
}

// LoadRun returns the view of the run runID, or an error matching
// [store.ErrNotFound]. A nil rt is an error matching [agent.ErrNoRuntime].
func (w *Workflow[S]) LoadRun(ctx context.Context, rt *agent.Runtime, runID string) (*RunInfo, error) {
	st, err := w.loadRunState(ctx, rt, runID)
	if err != nil {
		return nil, err
	}
	return st.info(), nil
}

// DecodeRunInfo makes the view of a workflow run from its stored record
// (a record of kind [store.KindWorkflow], whose id is
// "{workflow}/{run}"). It rejects data that is not a workflow run's
// record with an error matching [agent.ErrCorruptState].
func DecodeRunInfo(data []byte) (*RunInfo, error) {
	st, err := decodeRunState(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", agent.ErrCorruptState, err)
	}
	if st.RunID == "" || st.Workflow == "" || st.Step < 0 {
		return nil, fmt.Errorf("%w: workflow: missing run id or workflow", agent.ErrCorruptState)
	}
	switch st.Status {
	case RunRunning, RunInterrupted, RunComplete, RunFailed, RunCancelled:
	default:
		return nil, fmt.Errorf("%w: workflow run %s: unknown status %q", agent.ErrCorruptState, st.RunID, st.Status)
	}
	return st.info(), nil
}

// info returns the view of st, a copy that shares nothing with it.
func (st *runState) info() *RunInfo {
	r := &RunInfo{
		ID: st.RunID, Workflow: st.Workflow, Status: st.Status, Position: st.Position,
		State:      slices.Clone(st.State),
		Checkpoint: st.Checkpoint, CheckpointAt: st.CheckpointAt, LastStep: st.LastStep, LastNode: st.LastNode,
		Interrupts: st.Interrupts, Error: st.Error, ErrorKind: st.ErrorKind, Parent: st.Parent,
		Usage: st.Usage, Cost: st.Cost, StartedAt: st.StartedAt, EndedAt: st.EndedAt,
	}
	r.Visits = maps.Clone(st.Visits)
	if r.Visits == nil {
		r.Visits = map[string]int{}
	}
	r.Cost.Unpriced = slices.Clone(st.Cost.Unpriced)
	for _, b := range slices.Sorted(maps.Keys(st.Branches)) {
		if st.Branches[b] != nil && st.Branches[b].Done {
			r.BranchesDone = append(r.BranchesDone, b)
		}
	}
	if st.Interrupt != nil {
		i := *st.Interrupt
		r.Interrupt = &i
	}
	if st.From != nil {
		f := *st.From
		r.From = &f
	}
	if st.Pause != nil {
		p := *st.Pause
		r.Pause, r.Paused = &p, st.Paused()
	}
	if st.Budget != nil {
		b := *st.Budget
		r.Budget = &b
	}
	if st.sleeping() {
		r.SleepingUntil = st.SleepUntil
	}
	if st.Status == RunRunning && st.WaitingFor != "" && st.WaitStep == st.Step {
		r.WaitingFor, r.WaitUntil = st.WaitingFor, st.WaitUntil
	}
	return r
}
