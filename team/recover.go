package team

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
)

// RecoverOptions configures [Team.Recover]. A nil *RecoverOptions means
// the defaults.
type RecoverOptions struct {
	// WrittenBefore, when set, limits recovery to runs whose state was
	// last written before it, so that a sweep leaves alone the runs that
	// live workers are moving forward. Default: every unfinished run.
	WrittenBefore time.Time
	// EndedAfter, when set, also emits again the output of every run that
	// ended at or after it, for callers left waiting by a process that
	// recorded a run's end and died before publishing its output. Default:
	// ended runs are left alone.
	EndedAfter time.Time
}

const recoverPage = 256

// Recover starts again, for every unfinished run of the team recorded in
// rt's store, the member runs its current step waits for. Call it when a
// process starts on a broker that loses in-flight messages when the
// process dies, such as the in-memory broker. Member runs have
// deterministic ids, so starting one that exists starts nothing new (one
// that has ended answers again), and Recover is harmless on a durable
// broker. A run paused before its step stays paused (its pause event is
// sent again), and a run resumed whose step has not started a member run
// gets the resume's events again. A member agent's own run is the agent's
// to recover ([agent.Agent.Recover]), a nested team's the nested team's. It returns
// how many runs it continued; records that do not decode are reported in
// the error after the others are recovered.
func (t *Team) Recover(ctx context.Context, rt *agent.Runtime, opts *RecoverOptions) (int, error) {
	rt, err := t.onDemand(ctx, rt)
	if err != nil {
		return 0, err
	}
	var o RecoverOptions
	if opts != nil {
		o = *opts
	}
	c := &coordinator{t: t, rt: rt}
	n, after := 0, ""
	var errs []error
	for {
		recs, err := rt.Store().List(ctx, store.KindTeam, "", after, recoverPage)
		if err != nil {
			return n, fmt.Errorf("team %s: recover: %w", t.name, errors.Join(append(errs, err)...))
		}
		for _, r := range recs {
			if !o.WrittenBefore.IsZero() && !r.UpdatedAt.Before(o.WrittenBefore) {
				continue
			}
			st, err := decodeRunState(r.Data)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.ID, err))
				continue
			}
			if st.Team != t.name {
				continue
			}
			switch {
			case st.Status == agent.RunRunning:
				err = c.recoverRun(ctx, st)
			case st.Status.Terminal() && !o.EndedAfter.IsZero() && !st.EndedAt.Before(o.EndedAfter):
				err = emitOutput(ctx, rt, st)
			default:
				continue
			}
			if err != nil {
				return n, fmt.Errorf("team %s: recover run %s: %w", t.name, st.RunID, err)
			}
			n++
		}
		if len(recs) < recoverPage {
			if len(errs) > 0 {
				return n, fmt.Errorf("team %s: recover: %w", t.name, errors.Join(errs...))
			}
			return n, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// recoverRun sends again what the running run st waits for: the events of
// its last resume when they may not all have been sent; the pause of a run
// asked to pause before a member run of its step started (the pause takes
// effect, or its event is sent again); else the member runs of its
// current step, started again.
func (c *coordinator) recoverRun(ctx context.Context, st *runState) error {
	switch {
	case st.resumeUnsent():
		return sendResume(ctx, c.rt, st)
	case st.Pause != nil && !st.submitted():
		paused, err := c.pauseTakesEffect(ctx, st)
		if err != nil || paused {
			return err
		}
	}
	return c.startCalls(ctx, st, true)
}
