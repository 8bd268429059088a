package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/eventlog"
)

// startSweepEvery is how often, at most, the short-lived commands (calf run,
// calf chat) of all the processes that share a store sweep it as they
// start.
const startSweepEvery = time.Hour

// startSweepGrace is how long a short-lived command, done with its work,
// waits for its sweep to finish before it stops it; the next one, an hour
// later, goes on where it stopped.
const startSweepGrace = 5 * time.Second

// registerRetention registers --retention for a short-lived command.
func registerRetention(fl *pflag.FlagSet, retention *time.Duration) {
	fl.DurationVar(retention, "retention", defaultRetention, "remove the runs that ended longer ago than this, with their tool results, approvals and event logs, "+
		"as the command starts, when this process serves the agent (once an hour at most across the processes sharing the store; sessions are kept; 0 keeps every run)")
}

// checkRetention refuses a negative --retention.
func checkRetention(retention time.Duration) error {
	if retention < 0 {
		return usageError(fmt.Errorf("--retention must not be negative, got %s", retention))
	}
	return nil
}

// sweepAtStart removes, while a short-lived command does its work, the
// runs of rt's store that ended more than retention ago, with what belongs
// to them (dead letters and event logs too), unless a process sharing the
// store swept it within the hour: a store used by calf run alone stays
// bounded, as one that calf serve or calf worker keeps. The returned wait,
// called before the store is closed, gives the sweep a few seconds more to
// finish, then stops it. Errors are left to the next sweep.
func sweepAtStart(ctx context.Context, rt *agent.Runtime, retention time.Duration) (wait func()) {
	if retention <= 0 {
		return func() {}
	}
	rt.AddSweeper("deadletter", deadletter.Sweep)
	rt.AddSweeper("eventlog", eventlog.Sweep)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = rt.Sweep(sctx, agent.SweepOptions{Before: time.Now().Add(-retention), Every: startSweepEvery})
	}()
	return func() {
		t := time.NewTimer(startSweepGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		cancel()
		<-done
	}
}
