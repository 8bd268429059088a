package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// PauseState is the pause of a run: asked for, and once the run stopped
// before a model call, in effect.
type PauseState struct {
	Reason      string    `json:"reason,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// Step, once the pause is in effect, is the step whose model call
	// waits; 0 while the step in progress finishes.
	Step     int       `json:"step,omitempty"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	// Budget, when a budget paused the run, is the budget and what had
	// been spent; see [Budget].
	Budget *BudgetStop `json:"budget,omitempty"`
}

// PauseEvent is the payload of an agent's pause channel
// (calf.agent.{name}.pause): a run paused before the model call of Step,
// or was resumed. Its message id is "{run}.pause.{step}.{n}" for the n-th pause of the run (from 0),
// "{run}.resume.{step}.{n}" for its n-th resume (from 1).
type PauseEvent struct {
	Step int `json:"step"`
	// Paused is true when the run paused, false when it was resumed.
	Paused bool   `json:"paused"`
	Reason string `json:"reason,omitempty"`
	// Budget is the budget that paused the run, if one did.
	Budget *BudgetStop `json:"budget,omitempty"`
}

// pauseChannel returns the channel of an agent's pauses and resumes.
func pauseChannel(agent string) string { return channelPrefix + agent + "." + suffixPause }

const suffixPause = "pause"

// ErrRunEnded is matched by the error of Pause and Resume (of an agent, a
// team, or the runtime) for a run that has ended (and
// [approval.ErrRunEnded] by that of [approval.Respond] for a request whose
// run has ended).
var ErrRunEnded = runlife.ErrRunEnded

// Paused reports whether the pause of the run is in effect: it waits,
// holding no goroutine, for [Agent.Resume].
func (s *runState) Paused() bool {
	return s.Pause != nil && s.Pause.Step == s.Step && s.Phase == phaseInference && !s.Status.Terminal()
}

// RunEnded returns the status of a run that has ended, "" while it goes
// on: with the methods below, the run's state is a [runlife.Pausable].
func (s *runState) RunEnded() string {
	if s.Status.Terminal() {
		return string(s.Status)
	}
	return ""
}

// PauseField returns the address of the run's pause.
func (s *runState) PauseField() **PauseState { return &s.Pause }

// CountResume records a resume of the pause in effect: the step it lets
// go on.
func (s *runState) CountResume() {
	s.Resumes++
	s.ResumedStep = s.Step
}

// ResumeUnsent reports whether the events of the run's last resume may not
// all have been sent: the step it let go on still waits for its model
// call's answer (a resume whose broker was unreachable). Sending them
// again is harmless: the step's model call is made once.
func (s *runState) ResumeUnsent() bool {
	return s.Pause == nil && s.Resumes > 0 && s.ResumedStep == s.Step && s.Phase == phaseInference && !s.Status.Terminal()
}

// Pause asks the run runID to stop before its next model call, for
// reason: the step in progress (a model call, the tool calls it asked
// for, the subagents they started) finishes, and the run then waits, with
// nothing but its stored state, until [Agent.Resume] from any process. A
// pause event ([PauseEvent]) says when it took effect; [RunInfo.Paused]
// reports it. A run that handed off is paused where its chain continues.
// Pausing a paused run changes nothing; a run that has ended returns an
// error matching [ErrRunEnded]. Run and RunStream go on waiting through a
// pause (within their timeout); a caller that pauses runs for long should
// start them with [Agent.Submit]. [Runtime.Pause] does the same for an
// agent known by name.
func (a *Agent[Out]) Pause(ctx context.Context, rt *Runtime, runID, reason string) error {
	_, err := rt.Pause(ctx, RunRef{Kind: "agent", Name: a.name, RunID: runID}, reason)
	return err
}

// Resume lets the paused run runID go on: a run whose pause is in effect
// makes the model call it waits for, in whichever process serves its
// agent; a run whose pause has not taken effect yet goes on as if it had
// not been paused. The resume is recorded before its events are sent:
// when sending them fails (the broker unreachable), Resume called again
// sends them again. Resuming a run that is not paused changes nothing
// else; a run that has ended returns an error matching [ErrRunEnded].
// [Runtime.Resume] does the same for an agent known by name.
func (a *Agent[Out]) Resume(ctx context.Context, rt *Runtime, runID string) error {
	_, err := rt.Resume(ctx, RunRef{Kind: "agent", Name: a.name, RunID: runID})
	return err
}

// Pause pauses the run that run names, of any kind: an agent's run as
// [Agent.Pause] does, a team's or a workflow's as theirs do (see
// [RunKind]), and returns the run as it stands.
func (rt *Runtime) Pause(ctx context.Context, run RunRef, reason string) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if k, err := rt.runKind(run, "pause"); k != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return k.Pause(ctx, rt, run, reason)
	}
	return agentView(rt.pauseAgentRun(ctx, run, reason))
}

func (rt *Runtime) pauseAgentRun(ctx context.Context, run RunRef, reason string) (*RunInfo, error) {
	if err := run.agentRef("pause"); err != nil {
		return nil, err
	}
	agentName, runID := run.Name, run.RunID
	// A run whose input has not been handled yet starts paused.
	placeholder := &runState{RunID: runID, Agent: agentName, Status: RunRunning, StartedAt: rt.now()}
	st, err := runlife.Pause(ctx, rt.chain(agentName, runID, placeholder), &PauseState{Reason: reason, RequestedAt: rt.now()})
	if err != nil {
		return nil, fmt.Errorf("agent %s: pause run %s: %w", agentName, runID, err)
	}
	return st.info()
}

// Resume resumes the run that run names, of any kind: an agent's run as
// [Agent.Resume] does, a team's or a workflow's as theirs do (see
// [RunKind]), and returns the run as it stands.
func (rt *Runtime) Resume(ctx context.Context, run RunRef) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if k, err := rt.runKind(run, "resume"); k != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return k.Resume(ctx, rt, run)
	}
	return agentView(rt.resumeAgentRun(ctx, run))
}

func (rt *Runtime) resumeAgentRun(ctx context.Context, run RunRef) (*RunInfo, error) {
	if err := run.agentRef("resume"); err != nil {
		return nil, err
	}
	agentName, runID := run.Name, run.RunID
	st, send, err := runlife.Resume(ctx, rt.chain(agentName, runID, nil))
	if err != nil {
		return nil, fmt.Errorf("agent %s: resume run %s: %w", agentName, runID, err)
	}
	if send {
		if err := rt.emitResume(ctx, st); err != nil {
			d, _ := st.info()
			return d, fmt.Errorf("agent %s: resume run %s: %w", agentName, runID, err)
		}
	}
	return st.info()
}

// emitResume publishes the resume of st and the inference event its step
// waits for, under ids of their own: the step's first inference event was
// consumed when the run paused.
func (rt *Runtime) emitResume(ctx context.Context, st *runState) error {
	r := runlife.ResumeEvents{
		Run: st.RunID, Step: st.Step, N: st.Resumes, Metadata: st.metadata(),
		PauseChannel: pauseChannel(st.Agent), Resume: PauseEvent{Step: st.Step},
		StepChannel: inferenceChannel(st.Agent), EventID: engine.InferenceID(st.RunID, st.Step), Event: inferenceEvent{Step: st.Step},
		Unsent: func(err error) {
			rt.log.Warn("agent: resume event not published", "agent", st.Agent, "run", st.RunID, "err", err)
		},
	}
	return r.Send(ctx, rt.client)
}

// updateChain applies fn to the state of the run that carries on runID
// (the run itself, or the run its handoffs lead to), unless it has ended
// (an error matching [ErrRunEnded]). A run not stored yet is created as
// placeholder (a state of step 0, which the input handler completes), or
// not found when placeholder is nil.
func (rt *Runtime) updateChain(ctx context.Context, agentName, runID string, placeholder *runState, fn func(st *runState) (bool, error)) (*runState, error) {
	return runlife.Change(ctx, rt.chain(agentName, runID, placeholder), fn)
}

// chain returns the update of the state of the run that carries on
// runID, as updateChain describes: the runs that handed off are
// left alone, whatever the change.
func (rt *Runtime) chain(agentName, runID string, placeholder *runState) runlife.Update[*runState] {
	return func(ctx context.Context, fn func(st *runState) (bool, error)) (*runState, error) {
		run := runID
		for hops := 0; ; hops++ {
			var st *runState
			_, err := store.Update(ctx, rt.store, store.KindRun, run, func(data []byte, exists bool) ([]byte, error) {
				if !exists {
					if placeholder == nil || run != runID {
						return nil, store.ErrNotFound
					}
					st = placeholder
					if _, err := fn(st); err != nil {
						return nil, err
					}
					return st.encode()
				}
				var err error
				if st, err = decodeRunState(data); err != nil {
					return nil, err
				}
				changed, err := fn(st)
				if err != nil || !changed {
					return nil, err
				}
				return st.encode()
			})
			rt.runs.Forget(run) // the handlers' copy is behind: they read the store
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("no run %s of agent %s: %w", run, agentName, store.ErrNotFound)
			}
			if err != nil {
				return nil, err
			}
			if st.Status == RunHandedOff && st.HandedOffTo != nil && hops <= maxChain {
				run = st.HandedOffTo.RunID
				continue
			}
			return st, nil
		}
	}
}

// pauseStage is the inference stage of a paused run: the pause takes
// effect before the model call, and the handling ends; a run resumed
// meanwhile is read again and handled from the start.
func (h *handlers) pauseStage(ctx context.Context, inf *inference) (bool, error) {
	if inf.st.Pause == nil {
		return false, nil
	}
	paused, err := h.pauseTakesEffect(ctx, inf.st, inf.version)
	if err != nil || paused {
		return true, err
	}
	return true, h.onInference(ctx, inf.msg) // resumed meanwhile: read the run again
}

// pauseTakesEffect records that the paused run st stops before the model
// call of its current step, and publishes the pause. It reports false when
// the run was resumed (or moved on) meanwhile: the caller reads it again.
func (h *handlers) pauseTakesEffect(ctx context.Context, st *runState, version int64) (bool, error) {
	step := st.Step
	st, err := h.rt.runs.UpdateFrom(ctx, st, version, func(cur *runState) (bool, error) {
		if cur.Pause == nil || cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference || cur.Pause.Step == step {
			return false, nil
		}
		p := *cur.Pause // states share their pause with the cache's copies
		p.Step, p.PausedAt = step, h.rt.now()
		cur.Pause = &p
		return true, nil
	})
	if err != nil {
		return false, err
	}
	if !st.Paused() {
		return false, nil
	}
	return true, h.rt.emitPaused(ctx, st)
}

// emitPaused publishes the pause of st, which is in effect.
func (rt *Runtime) emitPaused(ctx context.Context, st *runState) error {
	ev := PauseEvent{Step: st.Step, Paused: true, Reason: st.Pause.Reason, Budget: st.Pause.Budget}
	_, err := rt.client.Emit(ctx, pauseChannel(st.Agent), ev, calf.WithID(st.RunID+".pause."+strconv.Itoa(st.Step)+"."+strconv.Itoa(st.Resumes)),
		calf.WithKey(st.RunID), calf.WithMetadata(st.metadata()))
	return err
}
