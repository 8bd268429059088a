package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
)

// fired reports the firing of a schedule's timer that the timers' loop
// published ("fire", under the run id of the firing), and kills the
// process as KillAtFire says: after the publish, before the timer is
// removed.
func (b *workerBroker) fired(ctx context.Context, msg *calf.Message) {
	if _, ok := calf.MessageFromContext(ctx); ok {
		return // a handler's, not a timer's
	}
	var ev schedule.FireEvent
	if json.Unmarshal(msg.Data, &ev) != nil || ev.Trigger || ev.Recheck {
		return
	}
	run := schedule.RunID(ev.Schedule, ev.At, false)
	b.rep.report(event{Ev: "fire", Run: run, ID: msg.ID})
	if b.cfg.KillAtFire && ev.At.Unix()%2 == 0 && claimCrash(b.cfg.CrashDir, run, "fire") {
		b.rep.crash(run, "fire")
	}
}

// startedByFiring kills the process as KillAtFire says right after the
// handler of a schedule's firing published the input of its run, before
// the firing is recorded: the firing is carried out again once its event
// comes back, later than the next firing.
func (b *workerBroker) startedByFiring(ctx context.Context, msg *calf.Message) {
	fire, ok := calf.MessageFromContext(ctx)
	if !ok || fire.Channel != schedule.FireChannel {
		return
	}
	var ev schedule.FireEvent
	if json.Unmarshal(fire.Data, &ev) != nil || ev.Trigger || ev.Recheck {
		return
	}
	run := msg.Metadata.RunID
	b.rep.report(event{Ev: "start", Run: run, ID: msg.ID})
	if b.cfg.KillAtFire && ev.At.Unix()%2 != 0 && claimCrash(b.cfg.CrashDir, run, "start") {
		b.rep.crash(run, "start")
	}
}

// A schedule of a second starts runs of W1's agent on a NATS server and a
// PostgreSQL of the test's own, served by three worker processes that
// serve schedules too. The worker that fires every other firing's timer
// kills itself with SIGKILL right after it published the firing, before
// the timer is removed (the timer is fired again by another worker once
// its lease runs out, with the same event id); the worker that carries
// out each other firing kills itself right after it published the input
// of the firing's run, before it recorded the firing (which is carried
// out again once its event comes back, after the next firing was due);
// every worker that died is started again; after a while the schedule is
// paused. Each firing
// the schedule recorded started one run, of the id RunID gives, and no
// other run of the schedule exists; no firing time is recorded twice;
// every run completed, calling the model once per step (again only for a
// run whose inference a killed worker handled); no run started before
// the one before it ended (the overlap policy, skip); a timer fired again
// only after the worker that fired it was killed; no timer of the
// schedule is left.
func TestScheduleFiringsAcrossKillNATSPostgres(t *testing.T) {
	const (
		slots  = 3
		firing = 14 * time.Second // how long the schedule fires before it is paused
	)
	h := newHarness(t)
	cfg := h.config(privateNATSPostgres)
	fastFailover(cfg)
	cfg.Schedules, cfg.KillAtFire = true, true
	c := newCaller(t, cfg)
	ctx := t.Context()

	workers := make([]*proc, slots)
	for i := range workers {
		workers[i] = h.start(cfg)
	}
	for _, p := range workers {
		h.ready(p)
	}
	// A worker started again is not waited for: it may die before it
	// says it serves, having fired a timer as it started.
	restart := func() {
		for i, p := range workers {
			select {
			case <-p.Exited():
				workers[i] = h.start(cfg)
			default:
			}
		}
	}

	// The firings as the schedule records them, by time: its record
	// keeps the last MaxHistory, so it is read as it goes.
	sched := schedule.New(c.rt, nil)
	name := "tick-" + calf.NewID()[:8]
	history := map[int64]schedule.Firing{}
	observe := func() {
		sc, err := sched.Get(ctx, name)
		if err != nil {
			t.Errorf("get the schedule: %v", err)
			return
		}
		seen := map[int64]bool{}
		for _, f := range sc.History {
			k := f.At.UnixNano()
			if seen[k] {
				t.Errorf("firing at %s recorded twice: %+v", f.At.Format(time.RFC3339Nano), sc.History)
			}
			seen[k] = true
			if old, ok := history[k]; ok && (old.RunID != f.RunID || old.Skipped != f.Skipped || !old.Fired.Equal(f.Fired)) {
				t.Errorf("firing at %s recorded as %+v, then as %+v", f.At.Format(time.RFC3339Nano), old, f)
			}
			history[k] = f
		}
	}
	t0 := time.Now()
	if _, err := sched.Add(ctx, schedule.Spec{Name: name, Kind: "agent", Runner: cfg.Agent, Prompt: prompt, Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(t0) < firing {
		restart()
		observe()
		<-tick.C
	}
	if _, err := sched.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}

	// Every run recorded ends, every timer of the schedule goes (one
	// whose firer died is fired again once its lease runs out, 5 s, and
	// finds the schedule paused or fired), and no firing is left
	// half-recorded.
	prefix := "schedule/" + name + "/"
	testwait.ForErr(t, 45*time.Second, "the runs to end and the timers to go", func() error {
		restart()
		observe()
		left, err := c.rt.Timers(ctx, prefix)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d timers left, the first %s", len(left), left[0].ID)
		}
		// A firing whose worker was killed after it started its runs is
		// recorded when its event comes back (the broker's ack wait).
		if sc, err := sched.Get(ctx, name); err != nil {
			return err
		} else if sc.Pending != nil {
			return fmt.Errorf("the firing at %s is not recorded yet", sc.Pending.At.Format(time.RFC3339Nano))
		}
		for _, f := range history {
			if f.RunID == "" {
				continue
			}
			v, err := c.rt.LoadRun(ctx, agent.RunRef{Kind: "agent", Name: cfg.Agent, RunID: f.RunID})
			if err != nil {
				return fmt.Errorf("run %s: %w", f.RunID, err)
			}
			if !v.RunStatus().Terminal() {
				return fmt.Errorf("run %s: %s", f.RunID, v.RunStatus())
			}
		}
		return nil
	})
	elapsed := time.Since(t0)
	h.stopAll()

	// The workers killed: each said so before it died.
	killed := map[int]bool{}
	h.mu.Lock()
	events := slices.Clone(h.events)
	h.mu.Unlock()
	fires := map[string][]event{} // by the run id of the firing
	atFire, atStart := 0, 0
	for _, ev := range events {
		switch ev.Ev {
		case "crash":
			killed[ev.PID] = true
			if ev.Point == "fire" {
				atFire++
			} else {
				atStart++
			}
		case "fire":
			fires[ev.Run] = append(fires[ev.Run], ev)
		}
	}

	// The runs of the schedule in the store: one per firing recorded
	// with a run, none other.
	recs, err := c.store.List(ctx, store.KindRun, "sched-"+name+"-", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, r := range recs {
		stored[r.ID] = true
	}
	byRun := map[string]schedule.Firing{}
	var started []schedule.Firing
	var missed, overlap int
	for _, f := range history {
		switch f.Skipped {
		case "":
			if want := schedule.RunID(name, f.At, false); f.RunID != want {
				t.Errorf("firing at %s started run %s, want %s", f.At.Format(time.RFC3339Nano), f.RunID, want)
			}
			if _, ok := byRun[f.RunID]; ok {
				t.Errorf("run %s started by two firings", f.RunID)
			}
			byRun[f.RunID] = f
			started = append(started, f)
		case "missed":
			missed++
		case "overlap":
			overlap++
		default:
			t.Errorf("firing %+v: skipped as %q; the schedule skips overlaps and buffers nothing", f, f.Skipped)
		}
		if f.Skipped != "" && f.RunID != "" {
			t.Errorf("firing %+v: skipped, with a run", f)
		}
		if f.Skipped != "" && stored[schedule.RunID(name, f.At, false)] {
			t.Errorf("firing at %s skipped (%s), yet its run is in the store", f.At.Format(time.RFC3339Nano), f.Skipped)
		}
	}
	for id := range stored {
		if _, ok := byRun[id]; !ok {
			t.Errorf("run %s is in the store, started by no firing recorded", id)
		}
	}
	if len(started) < 4 {
		t.Errorf("%d firings started a run in %s; want several", len(started), firing)
	}
	slices.SortFunc(started, func(a, b schedule.Firing) int { return a.At.Compare(b.At) })

	// Every run completed, one after the other, calling the model once
	// per step, or again when a worker killed had its inference in hand.
	infos := map[string]*agent.RunInfo{}
	requests, repeats := 0, 0
	for _, f := range started {
		id := f.RunID
		info, err := c.rt.LoadAgentRun(ctx, id)
		if err != nil {
			t.Errorf("run %s: %v", id, err)
			continue
		}
		infos[id] = info
		if info.Status != agent.RunComplete || !strings.Contains(string(info.Output), wantOutput) {
			t.Errorf("run %s: %s, output %s, error %q; want complete with %q", id, info.Status, info.Output, info.Error, wantOutput)
		}
		inKilled := false
		for _, ev := range h.eventsOf("handle", id) {
			if kindOf(ev.Channel) == "inference" && killed[ev.PID] {
				inKilled = true
			}
		}
		calls := h.modelCalls(id)
		for step := 1; step <= 2; step++ {
			n := calls[step]
			requests += n
			switch {
			case n == 0:
				t.Errorf("run %s: no model request at step %d", id, step)
			case n > 1 && !inKilled:
				t.Errorf("run %s: %d model requests at step %d, and no worker that handled its inference was killed", id, n, step)
			case n > 1:
				repeats += n - 1
			}
		}
		if len(calls) > 2 {
			t.Errorf("run %s: model requests by step %v; want steps 1 and 2", id, calls)
		}
	}
	h.mu.Lock()
	for id := range h.calls {
		if _, ok := byRun[id]; !ok {
			t.Errorf("model requests of run %q, which no firing started", id)
		}
	}
	h.mu.Unlock()
	for i := 1; i < len(started); i++ {
		prev, cur := infos[started[i-1].RunID], infos[started[i].RunID]
		if prev == nil || cur == nil {
			continue
		}
		if cur.StartedAt.Before(prev.EndedAt) {
			t.Errorf("run %s started at %s, before run %s ended at %s: the overlap policy is skip", cur.ID,
				cur.StartedAt.Format("15:04:05.000"), prev.ID, prev.EndedAt.Format("15:04:05.000"))
		}
	}

	// A timer fired again only after the worker that fired it died.
	refired := 0
	for run, evs := range fires {
		slices.SortStableFunc(evs, func(a, b event) int { return compareInt64(a.T, b.T) })
		for i := 1; i < len(evs); i++ {
			if !killed[evs[i-1].PID] {
				t.Errorf("firing %s: fired again by worker %d at %s though worker %d, which fired it at %s, was not killed", run,
					evs[i].PID, time.Unix(0, evs[i].T).Format("15:04:05.000"), evs[i-1].PID, time.Unix(0, evs[i-1].T).Format("15:04:05.000"))
			}
		}
		if len(evs) > 1 {
			refired++
		}
	}
	if atFire == 0 || atStart == 0 {
		t.Errorf("workers killed: %d right after a timer fired, %d right after a firing started its run; want some of each", atFire, atStart)
	}
	t.Logf("%s: %d firings recorded (%d started a run, %d skipped as overlapping, %d missed), %d timers fired (%d again after their firer died); workers killed: %d right after a timer fired, %d right after a firing started its run; %d runs, all complete; %d model requests (%d repeated after a kill)",
		elapsed.Round(time.Millisecond), len(history), len(started), overlap, missed, len(fires), refired, atFire, atStart, len(started), requests, repeats)
}
