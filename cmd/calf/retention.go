package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// registerRetention registers --retention for a short-lived command that
// serves the agent (calf run, calf chat): its worker sweeps as it starts
// (agent.WorkerOptions.Retention), which, of all the processes sharing the
// store, one does about once an hour.
func registerRetention(fl *pflag.FlagSet, retention *time.Duration) {
	fl.DurationVar(retention, "retention", defaultRetention, "remove the runs that ended longer ago than this, with their tool results, approvals and event logs, "+
		"as the command starts, when this process serves the agent (about once an hour at most across the processes sharing the store; sessions are kept; 0 keeps every run)")
}

// checkRetention refuses a negative --retention.
func checkRetention(retention time.Duration) error {
	if retention < 0 {
		return usageError(fmt.Errorf("--retention must not be negative, got %s", retention))
	}
	return nil
}
