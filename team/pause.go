package team

import (
	"context"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// PauseChannel returns the channel of a team's pauses and resumes: the
// payload is an [agent.PauseEvent], with ids as an agent's.
func PauseChannel(team string) string { return channelPrefix + team + "." + suffixPause }

const suffixPause = "pause"

// Paused reports whether the pause of the team run is in effect: it waits,
// holding no goroutine, for [Team.Resume].
func (s *runState) Paused() bool {
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

// RunEnded returns the status of a run that has ended, "" while it goes
// on: with the methods below, the run's state is a [runlife.Stepped], its
// step started once a member run of it was.
func (s *runState) RunEnded() string {
	if s.Status.Terminal() {
		return string(s.Status)
	}
	return ""
}

// RunStep is the run's current step.
func (s *runState) RunStep() int { return s.Step }

// PauseField returns the address of the run's pause.
func (s *runState) PauseField() **agent.PauseState { return &s.Pause }

// PauseAt puts the pause asked for in effect before the current step.
func (s *runState) PauseAt(now time.Time) {
	p := *s.Pause
	p.Step, p.PausedAt = s.Step, now
	s.Pause = &p
}

// CountResume records a resume of the pause in effect: the step it lets
// go on.
func (s *runState) CountResume() {
	s.Resumes++
	s.ResumedStep = s.Step
}

// ResumeUnsent reports whether the events of the run's last resume may
// not all have been sent: the step it let go on is the current one, and
// has neither started a member run nor been paused again.
func (s *runState) ResumeUnsent() bool {
	return s.ResumedStep > 0 && s.ResumedStep == s.Step && s.Pause == nil && s.Status == agent.RunRunning && !s.submitted()
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
	st, err := runlife.Pause(ctx, control(rt, runID), &agent.PauseState{Reason: reason, RequestedAt: rt.Client().Now()})
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
	st, send, err := runlife.Resume(ctx, control(rt, runID))
	if err != nil {
		return nil, fmt.Errorf("team: resume run %s: %w", runID, err)
	}
	if send {
		if err := sendResume(ctx, rt, st); err != nil {
			return st.info(), fmt.Errorf("team %s: resume run %s: %w", st.Team, runID, err)
		}
	}
	return st.info(), nil
}

// sendResume sends the events of the run's last resume: the resume event,
// then the step event from which the step handler starts the member runs.
func sendResume(ctx context.Context, rt *agent.Runtime, st *runState) error {
	r := runlife.ResumeEvents{
		Run: st.RunID, Step: st.Step, N: st.Resumes, Metadata: calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID},
		PauseChannel: PauseChannel(st.Team), Resume: agent.PauseEvent{Step: st.Step},
		StepChannel: StepChannel(st.Team), EventID: stepID(st.RunID, st.Step), Event: StepEvent{Step: st.Step},
	}
	return r.Send(ctx, rt.Client())
}

// control returns the update of the record of the team run runID for the
// run controls (see [runlife.Change]).
func control(rt *agent.Runtime, runID string) runlife.Update[*runState] {
	r := runlife.Records[*runState]{Store: rt.Store(), Kind: store.KindTeam, Decode: decodeRunState}
	return r.Update(runID, runID)
}

// pauseTakesEffect records that the paused run st stops before the member
// runs of its current step start, and publishes the pause. It reports false
// when the run was resumed (or moved on) meanwhile.
func (c *coordinator) pauseTakesEffect(ctx context.Context, st *runState) (bool, error) {
	rec := func(ctx context.Context, fn func(st *runState) (bool, error)) (*runState, error) {
		return update(ctx, c.rt.Store(), st.RunID, fn)
	}
	st, paused, err := runlife.TakeEffect(ctx, rec, st.Step, (*runState).submitted, c.rt.Client().Now())
	if err != nil || !paused {
		return false, err
	}
	ev := agent.PauseEvent{Step: st.Step, Paused: true, Reason: st.Pause.Reason}
	_, err = c.rt.Client().Emit(ctx, PauseChannel(st.Team), ev, calf.WithID(runlife.PauseID(st.RunID, st.Step, st.Resumes)),
		calf.WithKey(st.RunID), calf.WithMetadata(calf.Metadata{CorrelationID: st.RunID, RunID: st.RunID}))
	return true, err
}
