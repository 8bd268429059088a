package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/workflow"
)

// Runs of a workflow sleep on NATS and PostgreSQL, their wake-ups being
// durable timers; one of the two worker processes is killed with SIGKILL
// as the timers fall due (when the first run's step after the sleep
// starts), and a third starts. Every run goes on after its sleep, and
// the live workers complete each node after the sleep at most once per
// run (a node runs again only where the killed worker died before
// recording it): no timer lost, none fired into a second execution.
func TestTimersAcrossKillNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	fastFailover(cfg)
	wcfg := &workflowWorkerConfig{Kind: "sleeper", Name: "wf_sleeper_" + calf.NewID()[:8], SleepMillis: 2000}
	var runs []string
	c := newWorkflowCaller(t, cfg, wcfg, &runs)
	first := startWorkflowWorker(t, h, cfg, wcfg)
	startWorkflowWorker(t, h, cfg, wcfg)

	const n = 20
	results := map[string]<-chan wfResult{}
	for i := range n {
		id := fmt.Sprintf("wf-timer-%d-%s", i, calf.NewID()[:8])
		runs = append(runs, id)
		if _, err := c.w.Submit(t.Context(), c.rt, wfState{}, &workflow.RunOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
		results[id] = c.wait(t, id)
	}
	// Kill the first worker as the timers fall due.
	testwait.For(t, waitTimeout, "the first timer to fire", func() bool {
		if _, err := os.Stat(filepath.Join(cfg.CrashDir, executionsFile)); err != nil {
			return false // no node has started yet
		}
		for _, id := range runs {
			if countExecutions(executions(t, cfg.CrashDir, id), "start")["b"] > 0 {
				return true
			}
		}
		return false
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	h.waitExit(first)
	startWorkflowWorker(t, h, cfg, wcfg)

	for _, id := range runs {
		r := awaitWorkflow(t, id, results[id])
		if r.err != nil {
			info, lerr := c.w.LoadRun(context.Background(), c.rt, id)
			ts, _ := c.rt.Timers(context.Background(), "")
			all := ""
			for _, o := range runs {
				all += fmt.Sprintf("%s %+v\n", o, executions(t, cfg.CrashDir, o))
			}
			t.Errorf("Wait for run %s: %v\nrun: %+v (%v)\ntimers: %+v\nkilled %d\n%s", id, r.err, info, lerr, ts, first.pid, all)
			continue
		}
		if diff := cmp.Diff(wfState{Trail: []string{"a", "b", "c"}}, r.state); diff != "" {
			t.Errorf("run %s (-want +got):\n%s", id, diff)
		}
		// A node runs again only where the killed worker ran it and died
		// before recording its result: the live workers complete each
		// node at most once, whatever the timers' firings.
		live := map[string]int{}
		for _, e := range executions(t, cfg.CrashDir, id) {
			if e.phase == "done" && e.pid != first.pid {
				live[e.node]++
			}
		}
		if live["b"] > 1 || live["c"] > 1 {
			t.Errorf("run %s: the live workers completed b %d and c %d times, want at most once each", id, live["b"], live["c"])
		}
	}
	h.stopAll()
}
