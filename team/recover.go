package team

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// RecoverOptions configures [Team.Recover], as [agent.RecoverOptions]
// does an agent's (Runs names team runs). A nil *RecoverOptions means the
// defaults.
type RecoverOptions = agent.RecoverOptions

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
	r := runlife.Recovery{
		What: fmt.Sprintf("team %s: recover", t.name), Store: rt.Store(), Kind: store.KindTeam,
		Runs: o.Runs, WrittenBefore: o.WrittenBefore,
		One: func(ctx context.Context, rec store.Record) (bool, error) {
			st, err := decodeRunState(rec.Data)
			switch {
			case err != nil || st.Team != t.name:
				return false, err
			case st.Status == agent.RunRunning:
				return true, c.recoverRun(ctx, st)
			case st.Status.Terminal() && !o.EndedAfter.IsZero() && !st.EndedAt.Before(o.EndedAfter):
				return true, emitOutput(ctx, rt, st)
			}
			return false, nil
		},
	}
	return r.Run(ctx)
}

// recoverRun sends again what the running run st waits for: the events of
// its last resume when they may not all have been sent; the pause of a run
// asked to pause before a member run of its step started (the pause takes
// effect, or its event is sent again); else the member runs of its
// current step, started again.
func (c *coordinator) recoverRun(ctx context.Context, st *runState) error {
	switch {
	case st.ResumeUnsent():
		return sendResume(ctx, c.rt, st)
	case st.Pause != nil && !st.submitted():
		paused, err := c.pauseTakesEffect(ctx, st)
		if err != nil || paused {
			return err
		}
	}
	return c.startCalls(ctx, st, true)
}
