package team

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
)

// PauseChannel returns the channel of a team's pauses and resumes: the
// payload is an [agent.PauseEvent], with ids as an agent's.
func PauseChannel(team string) string { return channelPrefix + team + "." + suffixPause }

const suffixPause = "pause"

// paused reports whether the pause of the team run is in effect: it waits,
// holding no goroutine, for [Team.Resume].
func (s *runState) paused() bool {
	return s.Pause != nil && s.Pause.Step == s.Step && !s.Status.Terminal() && !s.submitted()
}

// submitted reports whether a member run of the current step was started.
func (s *runState) submitted() bool {
	for _, c := range s.Calls {
		if c.Submitted || c.Done {
			return true
		}
	}
	return false
}

// Pause asks the team run runID to stop before its next step, for reason:
// the member runs of the step in progress finish, and the run then waits,
// with nothing but its stored state, until [Team.Resume] from any process.
// A pause event on [PauseChannel] says when it took effect;
// [RunInfo.Paused] reports it. Pausing a paused run changes nothing; a run
// that has ended returns an error matching [agent.ErrRunEnded].
func (t *Team) Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	_, err := pauseRun(ctx, rt, runID, reason)
	return err
}

// pauseRun pauses the team run runID as [Team.Pause] does, and returns
// the run as it stands.
func pauseRun(ctx context.Context, rt *agent.Runtime, runID, reason string) (*RunInfo, error) {
	if rt == nil {
		return nil, agent.ErrNoRuntime
	}
	st, err := updatePause(ctx, rt, runID, func(st *runState) bool {
		if st.Pause != nil {
			return false
		}
		st.Pause = &agent.PauseState{Reason: reason, RequestedAt: rt.Client().Now()}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("team: pause run %s: %w", runID, err)
	}
	return st.info(), nil
}

// Resume lets a paused team run go on: a run whose pause is in effect
// starts the step it waits for; a run whose pause has not taken effect yet
// goes on as if it had not been paused. Resuming a run that is not paused
// changes nothing, but for sending again the events of a resume that
// failed halfway (its broker unreachable); a run that has ended returns an
// error matching [agent.ErrRunEnded].
func (t *Team) Resume(ctx context.Context, rt *agent.Runtime, runID string) error {
	_, err := resumeRun(ctx, rt, runID)
	return err
}

// resumeRun resumes the team run runID as [Team.Resume] does, and
// returns the run as it stands.
//
// The resume is recorded first, with the step it lets go on, and its
// events are sent after: a resume event on [PauseChannel] and the step's
// event. Until a member run of the step has started, a resume made again
// and [Team.Recover] send them again, with the same ids, so that a resume
// whose events were not all sent is not lost.
func resumeRun(ctx context.Context, rt *agent.Runtime, runID string) (*RunInfo, error) {
	if rt == nil {
		return nil, agent.ErrNoRuntime
	}
	st, err := updatePause(ctx, rt, runID, func(st *runState) bool {
		if st.Pause == nil {
			return false
		}
		if st.paused() {
			st.Resumes++
			st.ResumedStep = st.Step
		}
		st.Pause = nil
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("team: resume run %s: %w", runID, err)
	}
	if st.resumeUnsent() {
		if err := sendResume(ctx, rt, st); err != nil {
			return st.info(), fmt.Errorf("team %s: resume run %s: %w", st.Team, runID, err)
		}
	}
	return st.info(), nil
}

// resumeUnsent reports whether the events of the run's last resume may
// not all have been sent: the step it let go on is the current one, and
// has neither started a member run nor been paused again.
func (s *runState) resumeUnsent() bool {
	return s.ResumedStep > 0 && s.ResumedStep == s.Step && s.Pause == nil && s.Status == agent.RunRunning && !s.submitted()
}

// sendResume sends the events of the run's last resume: the resume event,
// then the step event from which the step handler starts the member runs.
// Their ids hold the count of resumes, so that sending them again is
// harmless, and a later resume of the same step sends a step event of its
// own.
func sendResume(ctx context.Context, rt *agent.Runtime, st *runState) error {
	n := strconv.Itoa(st.Resumes)
	md := calf.WithMetadata(calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID})
	if _, err := rt.Client().Emit(ctx, PauseChannel(st.Team), agent.PauseEvent{Step: st.Step}, calf.WithID(st.RunID+".resume."+strconv.Itoa(st.Step)+"."+n), calf.WithKey(st.RunID), md); err != nil {
		return err
	}
	_, err := rt.Client().Emit(ctx, StepChannel(st.Team), StepEvent{Step: st.Step}, calf.WithID(stepID(st.RunID, st.Step)+".resume."+n), calf.WithKey(st.RunID), md)
	return err
}

func updatePause(ctx context.Context, rt *agent.Runtime, runID string, fn func(st *runState) bool) (*runState, error) {
	st, err := update(ctx, rt.Store(), runID, func(st *runState) (bool, error) {
		if st.Status.Terminal() {
			return false, nil
		}
		return fn(st), nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if st.Status.Terminal() {
		return st, fmt.Errorf("%w with status %s", agent.ErrRunEnded, st.Status)
	}
	return st, nil
}

// pauseTakesEffect records that the paused run st stops before the member
// runs of its current step start, and publishes the pause. It reports false
// when the run was resumed (or moved on) meanwhile.
func (c *coordinator) pauseTakesEffect(ctx context.Context, st *runState) (bool, error) {
	step := st.Step
	st, err := update(ctx, c.rt.Store(), st.RunID, func(cur *runState) (bool, error) {
		if cur.Pause == nil || cur.Status.Terminal() || cur.Step != step || cur.submitted() || cur.Pause.Step == step {
			return false, nil
		}
		p := *cur.Pause
		p.Step, p.PausedAt = step, c.rt.Client().Now()
		cur.Pause = &p
		return true, nil
	})
	if err != nil {
		return false, err
	}
	if !st.paused() {
		return false, nil
	}
	ev := agent.PauseEvent{Step: st.Step, Paused: true, Reason: st.Pause.Reason}
	_, err = c.rt.Client().Emit(ctx, PauseChannel(st.Team), ev, calf.WithID(st.RunID+".pause."+strconv.Itoa(st.Step)+"."+strconv.Itoa(st.Resumes)),
		calf.WithKey(st.RunID), calf.WithMetadata(calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID}))
	return true, err
}
