package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/internal/timers"
	"github.com/calf-go/calf/workflow"
)

// Workflow runs sleep (a, then a durable timer, then b → c) on a NATS
// server and a PostgreSQL of the test's own, served by three worker
// processes that are killed with SIGKILL and started again in turns while
// the timers fall due: one at a time from outside, and, for every other
// run, the worker that fires the run's timer kills itself right after it
// published the event, before the timer is removed (the timer is then
// fired again by another worker once its lease runs out, with the same
// event id). Beside them runs a process of another deployment that shares
// the store but not the stream, and fires timers too. Every run
// completes; node b starts once per run, but for starts in workers killed
// before they recorded b; a timer fires again only after the worker that
// fired it was killed, with the same event id (which a handler emitting
// the step again also uses); and no timer is left in the store.
func TestTimersAcrossKillNATSPostgres(t *testing.T) {
	const (
		runs    = 20
		slots   = 3
		sleep0  = 2000 * time.Millisecond // the first run's sleep
		stagger = 200 * time.Millisecond  // and each next run's more
	)
	h := newHarness(t)
	cfg := h.config(privateNATSPostgres)
	fastFailover(cfg)
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	wcfg := &workflowWorkerConfig{Kind: "sleeper", Name: "wf_sleeper_" + calf.NewID()[:8], CrashAfterWake: true, Log: true}
	var ids []string
	c := newWorkflowCaller(t, cfg, wcfg, &ids)

	// A process of another deployment shares the store but not the
	// stream: W1's agent on a stream and prefix of its own. It fires the
	// store's timers too, and must leave the workflow's to the workers
	// whose stream carries them (fired into its own stream, where nobody
	// consumes the workflow's steps, their events were dropped).
	foreign := *cfg
	foreign.Namespace = calf.NewID()[:12]
	t.Setenv(workflowEnv, "")
	h.ready(h.start(&foreign))

	workers := make([]*proc, slots)
	for i := range workers {
		workers[i] = startWorkflowWorker(t, h, cfg, wcfg)
	}
	killed := map[int]bool{} // every worker killed, from outside or by itself
	results := map[string]<-chan wfResult{}
	sleeps := map[string]int{}
	t0 := time.Now()
	for i := range runs {
		mark := "-"
		if i%2 == 0 {
			mark = crashWakeMark
		}
		id := fmt.Sprintf("wf-timer-%02d%s%s", i, mark, calf.NewID()[:8])
		ids = append(ids, id)
		sleeps[id] = int((sleep0 + time.Duration(i)*stagger) / time.Millisecond)
		if _, err := c.w.Submit(t.Context(), c.rt, wfState{Sleep: sleeps[id]}, &workflow.RunOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
		results[id] = c.wait(t, id)
	}

	// While the timers fall due, kill a worker every 300 to 900 ms (the
	// one that has lived longest, while two others live), and start
	// again every worker that died, until every run has ended. A worker
	// started again is not waited for: it may die before it says it
	// serves, having fired a timer as it started.
	killFrom, killUntil := t0.Add(sleep0-500*time.Millisecond), t0.Add(sleep0+runs*stagger+2*time.Second)
	nextKill := killFrom
	outcomes := map[string]wfResult{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	var kills int
	for len(outcomes) < runs {
		for id, ch := range results {
			select {
			case r := <-ch:
				outcomes[id] = r
				delete(results, id)
			default:
			}
		}
		for i, p := range workers {
			select {
			case <-p.Exited():
				killed[p.pid] = true
				workers[i] = spawnWorkflowWorker(t, h, cfg, wcfg)
			default:
			}
		}
		if now := time.Now(); !now.Before(nextKill) && now.Before(killUntil) {
			nextKill = now.Add(300*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond))))
			oldest := workers[0]
			alive := 0
			for _, p := range workers {
				select {
				case <-p.Exited():
				default:
					alive++
				}
			}
			if alive == slots {
				if err := oldest.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
					t.Fatal(err) // not one that has just killed itself
				}
				killed[oldest.pid] = true
				kills++
				h.waitExit(oldest)
				workers = append(workers[1:], spawnWorkflowWorker(t, h, cfg, wcfg))
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Errorf("%d of %d runs ended within %s", len(outcomes), runs, waitTimeout)
			for id := range results {
				outcomes[id] = wfResult{err: fmt.Errorf("not ended within %s", waitTimeout)}
			}
		}
	}
	elapsed := time.Since(t0)
	// A timer whose worker died after publishing its event is fired again
	// once its lease runs out (5 s), by a live worker: wait for that.
	prefix := "workflow/" + wcfg.Name + "/"
	testwait.For(t, 30*time.Second, "the timers to be removed", func() bool {
		left, err := c.rt.Timers(context.Background(), prefix)
		return err == nil && len(left) == 0
	})
	drained := time.Since(t0)
	h.stopAll()

	// A worker that killed itself is killed, whether or not the loop
	// saw it exit before the runs ended.
	selfKills := 0
	for _, id := range ids {
		for _, ev := range h.eventsOf("crash", id) {
			killed[ev.PID] = true
			selfKills++
		}
	}
	var bRepeats, wakeRepeats, handles, republished int
	for _, id := range ids {
		r := outcomes[id]
		ex := executions(t, cfg.CrashDir, id)
		wakes := h.eventsOf("wake", id)
		handles += len(h.eventsOf("handle", id))
		if r.err != nil {
			t.Errorf("run %s: %v\n%s", id, r.err, diagnoseRun(t, c, cfg, wcfg, id, ex, wakes, h.eventsOf("handle", id), killed))
			continue
		}
		if diff := cmp.Diff(wfState{Trail: []string{"a", "b", "c"}, Sleep: sleeps[id]}, r.state); diff != "" {
			t.Errorf("run %s (-want +got):\n%s", id, diff)
		}
		// Node b: one start, but for starts in workers killed before
		// they recorded b; one completion, but for completions in
		// workers killed before they recorded it.
		starts, dones, liveStarts, liveDones := 0, 0, 0, 0
		for _, e := range ex {
			if e.node != "b" {
				continue
			}
			live := 0
			if !killed[e.pid] {
				live = 1
			}
			switch e.phase {
			case "start":
				starts, liveStarts = starts+1, liveStarts+live
			case "done":
				dones, liveDones = dones+1, liveDones+live
			}
		}
		if starts < 1 || dones < 1 || liveStarts > 1 || liveDones > 1 {
			t.Errorf("run %s: node b started %d and completed %d times, %d and %d in workers not killed; want once, and again only after a kill\n%+v",
				id, starts, dones, liveStarts, liveDones, ex)
		}
		if starts > 1 {
			bRepeats++
		}
		// The timer: fired once, and again only after the worker that
		// fired it was killed (before it removed it). A handler may emit
		// the step too, with the same id, when the worker that moved the
		// run on to it died before it said so (the run's recovery).
		steps := h.eventsOf("step", id)
		if len(wakes)+len(steps) == 0 {
			t.Errorf("run %s: the step of b was never published", id)
		}
		slices.SortStableFunc(wakes, func(a, b event) int { return compareInt64(a.T, b.T) })
		emitted := append(slices.Clone(wakes), steps...)
		for i, w := range emitted {
			if want := emitted[0].ID; w.ID != want {
				t.Errorf("run %s: step of b %d published with id %s, the first %s", id, i, w.ID, want)
			}
		}
		for i := 1; i < len(wakes); i++ {
			if !killed[wakes[i-1].PID] {
				t.Errorf("run %s: timer fired again by worker %d at %s though worker %d, which fired it at %s, was not killed", id,
					wakes[i].PID, time.Unix(0, wakes[i].T).Format("15:04:05.000"), wakes[i-1].PID, time.Unix(0, wakes[i-1].T).Format("15:04:05.000"))
			}
		}
		if len(wakes) > 1 {
			wakeRepeats++
		}
		republished += len(steps)
	}
	entries, err := c.rt.Store().List(context.Background(), timers.KindDue, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.ID, prefix) {
			t.Errorf("index entry left: %s", e.ID)
		}
	}
	t.Logf("%d runs in %s, their timers removed in %s; workers killed: %d from outside, %d right after a timer fired; timers fired again (after their firer died): %d; steps of b emitted again by a handler: %d; node b started again: %d runs; deliveries of b's step: %d",
		runs, elapsed.Round(time.Millisecond), drained.Round(time.Millisecond), kills, selfKills, wakeRepeats, republished, bRepeats, handles)
}

// diagnoseRun says what is known of a run that did not end: its stored
// state, its timers, its node executions, the publishes and deliveries
// of its wake-up.
func diagnoseRun(t *testing.T, c *workflowCaller, cfg *workerConfig, wcfg *workflowWorkerConfig, id string, ex []execution, wakes, handles []event, killed map[int]bool) string {
	t.Helper()
	var b strings.Builder
	ctx := context.Background()
	info, err := c.w.LoadRun(ctx, c.rt, id)
	fmt.Fprintf(&b, "run: %+v (%v)\n", info, err)
	ts, err := c.rt.Timers(ctx, "workflow/"+wcfg.Name+"/"+id+"/")
	fmt.Fprintf(&b, "timers: %+v (%v)\n", ts, err)
	fmt.Fprintf(&b, "executions: %+v\n", ex)
	for _, w := range wakes {
		fmt.Fprintf(&b, "wake-up %s published by %d (killed %v) at %s\n", w.ID, w.PID, killed[w.PID], time.Unix(0, w.T).Format("15:04:05.000"))
	}
	for _, hv := range handles {
		fmt.Fprintf(&b, "delivered to %d (killed %v), attempt %d, at %s\n", hv.PID, killed[hv.PID], hv.Attempt, time.Unix(0, hv.T).Format("15:04:05.000"))
	}
	pids := slices.Sorted(func(yield func(int) bool) {
		for p := range killed {
			if !yield(p) {
				return
			}
		}
	})
	fmt.Fprintf(&b, "killed: %v; executions file in %s\n", pids, cfg.CrashDir)
	return b.String()
}

// compareInt64 compares a and b as cmp.Compare does.
func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
