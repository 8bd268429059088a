package workflow

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

// RunStatus is the status of a workflow run.
type RunStatus string

// Run statuses.
const (
	RunRunning     RunStatus = "running"
	RunInterrupted RunStatus = "interrupted"
	RunComplete    RunStatus = "complete"
	RunFailed      RunStatus = "error"
	RunCancelled   RunStatus = "cancelled"
)

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool { return s == RunComplete || s == RunFailed || s == RunCancelled }

// Position is where a run is: the step it is at and what that step runs.
type Position struct {
	// Step numbers the run's steps from 1.
	Step int `json:"step"`
	// Node is the node the step runs; End once the run is complete.
	Node string `json:"node,omitempty"`
	// FanOut, for a parallel step, is the node whose branches the step
	// runs (Node is then empty).
	FanOut string `json:"fan_out,omitempty"`
	// Visits counts the times each node has been entered.
	Visits map[string]int `json:"visits"`
}

// branchState is the progress of one branch of a parallel step.
type branchState struct {
	Done  bool            `json:"done"`
	State json.RawMessage `json:"state,omitempty"`
	// Wake is when the branch asked the run to go on ([SleepError]): the
	// step after the parallel step starts at the latest of its branches'.
	Wake time.Time `json:"wake,omitzero"`
}

// runState is a workflow run as stored (kind "workflow", id
// "{workflow}/{run}"). A worker that handles any event of the run loads it,
// decides, and writes it back with a compare-and-swap before it emits what
// follows. Its JSON is a stored format: records written by earlier
// versions (testdata/records) must still decode, so a new field is
// omitempty. Readers see it through [RunInfo].
type runState struct {
	Workflow string    `json:"workflow"`
	RunID    string    `json:"run_id"`
	Status   RunStatus `json:"status"`
	Position
	// State is the state the current step runs on: the state of the last
	// checkpoint. For a complete run it is the final state.
	State json.RawMessage `json:"state"`
	// Branches records the finished branches of a parallel step.
	Branches map[string]*branchState `json:"branches,omitempty"`
	// Checkpoint is the number of the last checkpoint, from 0 (the input).
	Checkpoint   int       `json:"checkpoint"`
	CheckpointAt time.Time `json:"checkpoint_at"`
	// LastStep and LastNode name what the last checkpoint completed.
	LastStep int    `json:"last_step,omitempty"`
	LastNode string `json:"last_node,omitempty"`
	// Interrupts counts the run's interrupts; Interrupt describes the
	// current one while the run is interrupted.
	Interrupts int            `json:"interrupts,omitempty"`
	Interrupt  *InterruptInfo `json:"interrupt,omitempty"`
	// Resumed is the interrupt the current step was resumed from, and
	// ResumeInput the input it was resumed with, until the step completes.
	Resumed     int             `json:"resumed,omitempty"`
	ResumeInput json.RawMessage `json:"resume_input,omitempty"`
	Error       string          `json:"error,omitempty"`
	// Seq counts the run's transitions (each one emits events), and
	// Emitted is the last transition whose events were all emitted.
	Seq       int    `json:"seq"`
	Emitted   int    `json:"emitted"`
	ErrorKind string `json:"error_kind,omitempty"`
	// From names the checkpoint a forked run started from.
	From *ForkFrom `json:"from,omitempty"`
	// ReplyTo and Parent are as the run's InputEvent gave them.
	ReplyTo *agent.ReplyTo `json:"reply_to,omitempty"`
	Parent  string         `json:"parent,omitempty"`
	// Usage and Cost add up the runs of the workflow's agent nodes.
	Usage     model.Usage `json:"usage"`
	Cost      model.Cost  `json:"cost"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at,omitzero"`
	// Pause, when set, is the run's pause: asked for, and once Pause.Step
	// is the current step, in effect (see pause.go).
	Pause *agent.PauseState `json:"pause,omitempty"`
	// Unpaused counts the times the run was resumed from a pause in
	// effect, and UnpausedStep is the step the last of them let go on:
	// the events of that step carry the count in their ids, apart from
	// those emitted before the pause.
	Unpaused     int `json:"unpaused,omitempty"`
	UnpausedStep int `json:"unpaused_step,omitempty"`
	// Budget, when set, bounds what the run's child runs spend: each gets
	// what is left of it once Usage and Cost are counted.
	Budget *agent.Budget `json:"budget,omitempty"`
	// Children names the child runs of the current step (of its agent
	// nodes and sub-workflows), so that a process without the workflow's
	// definition reaches them by name (see [Kind]). Records of earlier
	// versions have none.
	Children []stepChild `json:"children,omitempty"`
	// SleepUntil, when set, is when the step SleepStep starts: a node
	// returned a [SleepError] before it, and its step events wait as a
	// timer until then.
	SleepUntil time.Time `json:"sleep_until,omitzero"`
	SleepStep  int       `json:"sleep_step,omitempty"`
	// WaitingFor, when set, is the signal a node of the step WaitStep
	// waits for ([WaitSignal]), until WaitUntil when it is set.
	WaitingFor string    `json:"waiting_for,omitempty"`
	WaitStep   int       `json:"wait_step,omitempty"`
	WaitUntil  time.Time `json:"wait_until,omitzero"`
}

// stepChild is a node of a run's current step that starts a child run:
// of the agent or the workflow (Kind) named Name.
type stepChild struct {
	Node string `json:"node"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// childBudget returns the budget of a child run started now: what is
// left of the run's budget once the child runs that have finished are
// counted, or nil for a run without one.
func (st *runState) childBudget() *agent.Budget {
	if st.Budget == nil {
		return nil
	}
	return st.Budget.Remaining(agent.Spent{Usage: st.Usage, Cost: st.Cost})
}

// stepChildren returns the nodes of the run's current step that start a
// child run.
func (w *Workflow[S]) stepChildren(st *runState) []stepChild {
	nodes := []string{st.Node}
	if st.FanOut != "" {
		f := w.fanOuts[st.FanOut]
		if f == nil {
			return nil
		}
		nodes = f.branches
	}
	var out []stepChild
	for _, n := range nodes {
		if c := w.nodes[n].agent; c != nil {
			out = append(out, stepChild{Node: n, Kind: c.kind, Name: c.name})
		}
	}
	return out
}

// Checkpoint is the state of a run after one of its steps, as stored (kind
// "checkpoint", id "{run}/{seq}" with seq on six digits).
type Checkpoint[S any] struct {
	RunID string
	// Seq numbers the run's checkpoints from 0, the run's input.
	Seq int
	// Step and Node say what completed (0 and "" for the input; for a
	// parallel step, Node lists the branches).
	Step int
	Node string
	// Next is where the run goes from here; Next.Node is End after the
	// last node.
	Next  Position
	State S
	Time  time.Time
}

type storedCheckpoint struct {
	RunID string          `json:"run_id"`
	Seq   int             `json:"seq"`
	Step  int             `json:"step"`
	Node  string          `json:"node,omitempty"`
	Next  Position        `json:"next"`
	State json.RawMessage `json:"state"`
	Time  time.Time       `json:"time"`
}

func recordID(workflow, run string) string { return workflow + "/" + run }
func checkpointID(run string, seq int) string {
	return fmt.Sprintf("%s/%06d", run, seq)
}

// checkpointOf returns the checkpoint a run's state records.
func checkpointOf(st *runState) storedCheckpoint {
	return storedCheckpoint{RunID: st.RunID, Seq: st.Checkpoint, Step: st.LastStep, Node: st.LastNode,
		Next: st.Position, State: st.State, Time: st.CheckpointAt}
}

func decodeRunState(data []byte) (*runState, error) {
	var st runState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("workflow: decode run state: %w", err)
	}
	if st.Visits == nil {
		st.Visits = map[string]int{}
	}
	return &st, nil
}

// loadRunState returns the stored state of a run, or an error matching
// store.ErrNotFound.
func (w *Workflow[S]) loadRunState(ctx context.Context, rt *agent.Runtime, runID string) (*runState, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: run %s: %w", w.name, runID, agent.ErrNoRuntime)
	}
	rec, err := rt.Store().Get(ctx, store.KindWorkflow, recordID(w.name, runID))
	if err != nil {
		return nil, fmt.Errorf("workflow %s: run %s: %w", w.name, runID, err)
	}
	return decodeRunState(rec.Data)
}

// Checkpoints returns the checkpoints of a run, in order: the input as
// checkpoint 0, then one after each step that completed.
func (w *Workflow[S]) Checkpoints(ctx context.Context, rt *agent.Runtime, runID string) ([]Checkpoint[S], error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: run %s: checkpoints: %w", w.name, runID, agent.ErrNoRuntime)
	}
	var out []Checkpoint[S]
	after := ""
	for {
		recs, err := rt.Store().List(ctx, store.KindCheckpoint, runID+"/", after, 100)
		if err != nil {
			return nil, fmt.Errorf("workflow %s: checkpoints of %s: %w", w.name, runID, err)
		}
		for _, r := range recs {
			cp, err := w.decodeCheckpoint(r.Data)
			if err != nil {
				return nil, err
			}
			out = append(out, cp)
		}
		if len(recs) < 100 {
			return out, nil
		}
		after = recs[len(recs)-1].ID
	}
}

func (w *Workflow[S]) decodeCheckpoint(data []byte) (Checkpoint[S], error) {
	var sc storedCheckpoint
	if err := json.Unmarshal(data, &sc); err != nil {
		return Checkpoint[S]{}, fmt.Errorf("workflow %s: decode checkpoint: %w", w.name, err)
	}
	cp := Checkpoint[S]{RunID: sc.RunID, Seq: sc.Seq, Step: sc.Step, Node: sc.Node, Next: sc.Next, Time: sc.Time}
	if err := json.Unmarshal(sc.State, &cp.State); err != nil {
		return Checkpoint[S]{}, fmt.Errorf("workflow %s: checkpoint %d of %s: decode state: %w", w.name, sc.Seq, sc.RunID, err)
	}
	return cp, nil
}

func (w *Workflow[S]) loadCheckpoint(ctx context.Context, rt *agent.Runtime, run string, seq int) (*storedCheckpoint, error) {
	rec, err := rt.Store().Get(ctx, store.KindCheckpoint, checkpointID(run, seq))
	if err != nil {
		return nil, fmt.Errorf("workflow %s: checkpoint %d of run %s: %w", w.name, seq, run, err)
	}
	var sc storedCheckpoint
	if err := json.Unmarshal(rec.Data, &sc); err != nil {
		return nil, fmt.Errorf("workflow %s: decode checkpoint %d of run %s: %w", w.name, seq, run, err)
	}
	return &sc, nil
}

// saveCheckpoint writes the checkpoint a run's state records, unless it is
// there already.
func (w *Workflow[S]) saveCheckpoint(ctx context.Context, rt *agent.Runtime, st *runState) error {
	data, err := json.Marshal(checkpointOf(st))
	if err != nil {
		return err
	}
	_, err = rt.Store().Put(ctx, store.KindCheckpoint, checkpointID(st.RunID, st.Checkpoint), data, 0)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("workflow %s: save checkpoint %d of %s: %w", w.name, st.Checkpoint, st.RunID, err)
	}
	return nil
}
