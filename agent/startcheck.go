package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// startCheck is the check, made once StartTimeout has passed without a
// sign of the run, that some process serves the agent.
type startCheck struct {
	due   time.Time // zero once the check is made or not wanted
	seen  bool      // a sign of the run came
	input string    // the run's input channel, whose message is no sign
	// check reports ErrNotServed, or nil when the run has started or a
	// process may yet take it.
	check func(ctx context.Context) error
}

func (a *Agent[Out]) startCheck(rt *Runtime, id string, opts *RunOptions) *startCheck {
	c := &startCheck{}
	if opts != nil && opts.WaitForWorkers {
		return c
	}
	c.due = time.Now().Add(a.opts.StartTimeout)
	c.input = InputChannel(a.name)
	c.check = func(ctx context.Context) error {
		if _, err := rt.store.Get(ctx, store.KindRun, id); !errors.Is(err, store.ErrNotFound) {
			return nil // started (or the store cannot tell)
		}
		n, known, err := calf.GroupMembers(ctx, rt.client.Broker(), c.input)
		if err != nil || !known || n > 0 {
			return nil // served, but busy or on another store; or unknown
		}
		cause := fmt.Errorf("%w %s: nothing consumed its input channel %s within %s; start a worker that serves it (calf worker), "+
			"or call Serve in this process, or set RunOptions.WaitForWorkers to wait for one", ErrNotServed, a.name, c.input, a.opts.StartTimeout)
		// Cancel the run only if no worker has taken it meanwhile: a run
		// that has started is waited for.
		if started, err := rt.cancelUnstarted(ctx, id, a.name, cause.Error()); err != nil || started {
			return nil
		}
		return cause
	}
	return c
}

// cancelUnstarted records the run id cancelled for reason if no handler
// has created it yet, so that its input, if it comes, is refused; it
// reports started when the run exists (a worker took it), and cancels
// nothing then.
func (rt *Runtime) cancelUnstarted(ctx context.Context, id, agentName, reason string) (started bool, err error) {
	st := &runState{RunID: id, Agent: agentName, Status: RunCancelled, Error: reason, NotServed: true, StartedAt: rt.now(), EndedAt: rt.now()}
	data, err := st.encode()
	if err != nil {
		return false, err
	}
	_, err = rt.store.Put(ctx, store.KindRun, id, data, 0)
	if errors.Is(err, store.ErrConflict) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if err := rt.emitOutput(ctx, st); err != nil {
		rt.log.Warn("agent: emit the output of a run no process serves", "agent", agentName, "run", id, "err", err)
	}
	return false, nil
}

// waitForWorkers waits, when opts ask for it, until some process serves
// the agent. The input waits in the broker for a worker anyway (its group
// is prepared, see Runtime.prepareInput); waiting here keeps the start
// check from cancelling the run. A broker that cannot tell is not waited
// for.
func (a *Agent[Out]) waitForWorkers(ctx context.Context, rt *Runtime, id string, opts *RunOptions) error {
	if opts == nil || !opts.WaitForWorkers {
		return nil
	}
	in := InputChannel(a.name)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		n, known, err := calf.GroupMembers(ctx, rt.client.Broker(), in)
		if err == nil && (!known || n > 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			re := a.runError(id, RunCancelled, fmt.Sprintf("no process came to serve the agent (its input channel %s) before the caller stopped waiting: %v", in, context.Cause(ctx)))
			re.Err = context.Cause(ctx)
			return re
		case <-time.After(wait):
		}
	}
}

// pending reports whether the check is still to be made.
func (c *startCheck) pending() bool { return !c.due.IsZero() && !c.seen }

// next returns the next message of f, making the start check when it is
// due: it fails with ErrNotServed when no process serves the agent.
func (c *startCheck) next(ctx context.Context, f *calf.Follower) (*calf.Message, error) {
	for c.pending() {
		cctx, cancel := context.WithDeadline(ctx, c.due)
		m, err := f.Next(cctx)
		cancel()
		if err == nil {
			c.seen = m.Channel != c.input
			return m, nil
		}
		if ctx.Err() != nil || cctx.Err() == nil {
			return nil, err
		}
		c.due = time.Time{}
		if err := c.check(ctx); err != nil {
			return nil, err
		}
	}
	return f.Next(ctx)
}

// notServed reports a run that no process serves, which the start check
// has recorded cancelled.
func (a *Agent[Out]) notServed(_ context.Context, _ *Runtime, id string, cause error) error {
	re := a.runError(id, RunCancelled, cause.Error())
	re.Err = ErrNotServed
	return re
}

// abandon cancels a run whose caller stopped waiting, and reports it.
func (a *Agent[Out]) abandon(ctx context.Context, rt *Runtime, id string) error {
	cause := context.Cause(ctx)
	reason := "the caller stopped waiting: " + cause.Error()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, _ := rt.cancelAgentRun(bg, RunRef{Kind: "agent", Name: a.name, RunID: id}, reason)
	if st != nil && st.Status != RunCancelled {
		// The run ended just before the caller gave up.
		reason = fmt.Sprintf("the run ended (%s) but the caller stopped waiting: %v", st.Status, cause)
	}
	re := a.runError(id, RunCancelled, reason)
	re.Err = cause
	return re
}
