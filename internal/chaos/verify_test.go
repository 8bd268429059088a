package chaos

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
)

// settleTimeout bounds how long the verifier waits, after the load, for
// the dead letters to be recorded and for the runs not answered to end.
const settleTimeout = 20 * time.Second

// verdict is what the verifier found.
type verdict struct {
	runs, completed int
	// kinds counts the runs whose caller got no correct output, by what it
	// got instead.
	kinds map[string]int
	// samples holds an error message of each kind.
	samples map[string]string
	// Of the runs without their output at the caller: unseen completed in
	// the store without a replay, replayed completed after the replay of
	// their dead letters, lost ended nowhere (or failed, or were
	// cancelled).
	unseen, replayed, lost int
	lostByStatus           map[string]int
	// parkedRuns are the runs with a dead letter.
	parkedRuns int
	// Repeats: tool executions and model calls beyond the first, those
	// before anything was recorded (allowed) and after (doubles).
	toolRepeats, toolDoubles   int
	modelRepeats, modelDoubles int
	// Dead letters: logged as parked by the brokers, recorded in the
	// store, parked but not recorded, dropped; messages the brokers could
	// not park.
	dlParked, dlRecorded, dlMissing, dlDropped, dlUnparked int
	// waited counts the callers past the bound: their Run returned at it,
	// or had not returned.
	waited, stuck int
	// outages and the recovery after each (negative: none).
	outages  []outage
	recovery []time.Duration
	// kills describes each worker kill's recovery.
	kills []string
	// unpublished counts the completed runs whose output never came on
	// the agent's output channel; republished those whose output came
	// more than once.
	unpublished, republished int
	// repeats and repeatAttempts are the caller's (see caller.repeats).
	repeats, repeatAttempts int
	// notServed counts the runs cancelled as not served.
	notServed int
	loadTook  time.Duration
	// logMessages counts the processes' warning and error lines.
	logMessages map[string]int
}

// verify checks every run of the load.
func verify(t *testing.T, h *harness, c *caller, st store.Store, outages []outage, cfg *config, start, end, bound time.Time) *verdict {
	ctx, cancel := context.WithTimeout(context.Background(), 3*settleTimeout)
	defer cancel()
	c.mu.Lock()
	outcomes := append([]runOutcome(nil), c.outcomes...)
	stuck := maps.Clone(c.inflight)
	c.mu.Unlock()
	v := &verdict{kinds: map[string]int{}, samples: map[string]string{}, lostByStatus: map[string]int{}, outages: outages}
	v.runs = len(outcomes) + len(stuck)
	v.stuck = len(stuck)
	v.waited = len(stuck)
	answered := map[string]time.Time{} // runs with their output at the caller, by when
	var pending []string               // runs without it
	for _, o := range outcomes {
		if o.Kind == "ok" {
			v.completed++
			answered[o.ID] = o.End
			continue
		}
		v.kinds[o.Kind]++
		if _, ok := v.samples[o.Kind]; !ok {
			v.samples[o.Kind] = o.Err
		}
		if o.Kind == "timeout" {
			v.waited++
		}
		if o.Kind == "not served" {
			v.notServed++
		}
		pending = append(pending, o.ID)
	}
	for id := range stuck {
		v.kinds["in flight"]++
		pending = append(pending, id)
	}

	// Dead letters: every message a broker parked must be recorded.
	h.mu.Lock()
	parked := maps.Clone(h.logs.parked)
	v.dlDropped, v.dlUnparked = h.logs.dropped, h.logs.unparked
	h.mu.Unlock()
	v.dlParked = len(parked)
	var records []*deadletter.Record
	testwait.Until(t, settleTimeout, func() bool {
		var err error
		records, err = deadletter.List(ctx, st)
		if err != nil {
			t.Errorf("list the dead letters: %v", err)
		}
		recorded := map[parkedKey]bool{}
		for _, r := range records {
			if r.Message != nil {
				recorded[parkedKey{r.Message.ID, r.Group}] = true
			}
		}
		v.dlMissing = 0
		for k := range parked {
			if !recorded[k] {
				v.dlMissing++
			}
		}
		return v.dlMissing == 0
	})
	v.dlRecorded = len(records)

	// Replay every dead letter not replayed yet, at once, as calf
	// deadletters replay --all does.
	replayedRuns := map[string]bool{}
	parkedRuns := map[string]bool{}
	for _, r := range records {
		if r.Message != nil {
			parkedRuns[r.Message.Metadata.RunID] = true
		}
	}
	toReplay, err := deadletter.Select(ctx, st, deadletter.Filter{})
	if err != nil {
		t.Errorf("select the dead letters: %v", err)
	}
	ids := make([]string, 0, len(toReplay))
	for _, r := range toReplay {
		ids = append(ids, r.ID)
	}
	for _, o := range deadletter.ReplayMany(ctx, c.b, st, ids, time.Now()) {
		if o.Err != nil {
			t.Errorf("replay dead letter %s: %v", o.Record.ID, o.Err)
			continue
		}
		if m := o.Record.Message; m != nil {
			replayedRuns[m.Metadata.RunID] = true
		}
	}
	v.parkedRuns = len(parkedRuns)

	// The runs without their output at the caller: did they end?
	status := map[string]string{}
	wctx, cancel := context.WithTimeout(ctx, settleTimeout)
	for _, id := range pending {
		out, err := c.agent.Wait(wctx, c.rt, id)
		switch {
		case err == nil && classify(nil, out) == "ok":
			status[id] = "completed"
		case err == nil:
			status[id] = "wrong output"
		case wctx.Err() != nil:
			status[id] = "not ended"
		default:
			status[id] = shortStatus(err)
		}
	}
	cancel()
	for id, s := range status {
		switch {
		case s == "completed" && replayedRuns[id]:
			v.replayed++
		case s == "completed":
			v.unseen++
		default:
			v.lost++
			v.lostByStatus[s]++
		}
	}

	// Every completed run's output on the agent's output channel, once.
	testwait.Until(t, settleTimeout, func() bool {
		v.unpublished, v.republished = 0, 0
		c.mu.Lock()
		v.repeats, v.repeatAttempts = c.repeats, c.repeatAttempts
		for id := range answered {
			switch n := c.outputs[id]; {
			case n == 0:
				v.unpublished++
			case n > 1:
				v.republished++
			}
		}
		for id, s := range status {
			if s == "completed" {
				switch n := c.outputs[id]; {
				case n == 0:
					v.unpublished++
				case n > 1:
					v.republished++
				}
			}
		}
		c.mu.Unlock()
		return v.unpublished == 0
	})

	// Repeats of recorded steps. A run's add runs only after its first
	// model response is recorded, and its second model call only after
	// add's result is recorded; its output reaches the caller only after
	// its end is recorded.
	h.mu.Lock()
	for run, steps := range h.calls {
		tools := h.tools[run]
		firstTool := int64(math.MaxInt64)
		for _, t := range tools {
			firstTool = min(firstTool, t)
		}
		firstSecond := int64(math.MaxInt64)
		for _, t := range steps[2] {
			firstSecond = min(firstSecond, t)
		}
		answeredAt := int64(math.MaxInt64)
		if at, ok := answered[run]; ok {
			answeredAt = at.UnixNano()
		}
		for step, times := range steps {
			v.modelRepeats += len(times) - 1
			for _, t := range times {
				if step == 1 && t > firstTool || step == 2 && t > answeredAt {
					v.modelDoubles++
				}
			}
		}
		if len(tools) > 1 {
			v.toolRepeats += len(tools) - 1
		}
		for _, t := range tools {
			if t > firstSecond {
				v.toolDoubles++
			}
		}
	}
	v.logMessages = maps.Clone(h.logs.messages)
	handles := append([]event(nil), h.handles...)
	h.mu.Unlock()

	// Recovery after each outage: from its end to the next run answered;
	// after a worker kill, until every run it had in hand moved again.
	var ends []time.Time
	for _, at := range answered {
		ends = append(ends, at)
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	for _, o := range outages {
		if cfg.killWorkers {
			// A worker killed with no run in hand has nothing to recover.
			if d, n, last := killRecovery(o, handles, answered); n > 0 {
				v.recovery = append(v.recovery, d)
				v.kills = append(v.kills, fmt.Sprintf("worker %d killed at %s with %d runs in hand: the last moved after %s (run %s, on %s)",
					o.PID, o.Start.Format("15:04:05.000"), n, d.Round(time.Millisecond), last.Run, last.Channel))
			}
			continue
		}
		i, _ := slices.BinarySearchFunc(ends, o.End, func(a, b time.Time) int { return a.Compare(b) })
		if i == len(ends) {
			v.recovery = append(v.recovery, -1)
			continue
		}
		v.recovery = append(v.recovery, ends[i].Sub(o.End))
	}
	return v
}

// killRecovery returns the time from the kill o to the first handler, on
// another worker, of the last of the runs the killed worker had in hand
// (it started the last handler of the run before the kill, and the run
// was not answered by then), or -1 when one of them never moved again;
// and how many runs it had in hand.
func killRecovery(o outage, handles []event, answered map[string]time.Time) (worst time.Duration, inHand int, worstLast event) {
	kill := o.Start.UnixNano()
	last := map[string]event{} // each run's last handler before the kill
	next := map[string]int64{} // each run's first handler after it elsewhere
	for _, ev := range handles {
		switch {
		case ev.T <= kill:
			last[ev.Run] = ev
		case ev.PID != o.PID:
			if _, ok := next[ev.Run]; !ok {
				next[ev.Run] = ev.T
			}
		}
	}
	for run, ev := range last {
		if ev.PID != o.PID {
			continue
		}
		if at, ok := answered[run]; ok && !at.After(o.Start) {
			continue
		}
		t, ok := next[run]
		if !ok {
			if _, done := answered[run]; done {
				continue // its last handler had emitted its output
			}
			return -1, inHand + 1, ev
		}
		inHand++
		if d := time.Duration(t - kill); d > worst {
			worst, worstLast = d, ev
		}
	}
	return worst, inHand, worstLast
}

// shortStatus names the way a run ended without output.
func shortStatus(err error) string {
	s := err.Error()
	for _, k := range []string{"failed", "cancelled", "parked", "not found"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// percentile returns the p-th percentile of sorted durations, by nearest
// rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// report prints the figures and fails the test on what must not happen.
func (v *verdict) report(t *testing.T, cfg *config) {
	var rec []time.Duration
	unrecovered := 0
	for _, r := range v.recovery {
		if r < 0 {
			unrecovered++
			continue
		}
		rec = append(rec, r)
	}
	slices.Sort(rec)
	actions := map[string]int{}
	for _, o := range v.outages {
		actions[o.Action]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos %s: %d callers, %d workers, load %s (window %s), seed %d\n", cfg.name, cfg.callers, cfg.workers, v.loadTook.Round(time.Second), cfg.duration, cfg.seed)
	fmt.Fprintf(&b, "  outages          %d %v; recovery p50 %s, p99 %s, max %s; never recovered %d\n",
		len(v.outages), actions, percentile(rec, 50).Round(time.Millisecond), percentile(rec, 99).Round(time.Millisecond),
		percentile(rec, 100).Round(time.Millisecond), unrecovered)
	for _, k := range v.kills {
		fmt.Fprintf(&b, "    %s\n", k)
	}
	fmt.Fprintf(&b, "  runs             %d: completed at the caller %d, without output %d %v\n", v.runs, v.completed, v.runs-v.completed, v.kinds)
	fmt.Fprintf(&b, "  without output   unseen (completed in the store) %d, replayed home %d, lost %d %v\n", v.unseen, v.replayed, v.lost, v.lostByStatus)
	fmt.Fprintf(&b, "  parked           runs with a dead letter %d; dead letters parked %d, recorded %d, missing %d, dropped %d; not parked (kept) %d\n",
		v.parkedRuns, v.dlParked, v.dlRecorded, v.dlMissing, v.dlDropped, v.dlUnparked)
	fmt.Fprintf(&b, "  outputs          completed runs whose output was never published %d, published more than once %d "+
		"(%d deliveries again with the first one's id, %d of them with an attempt above 1)\n", v.unpublished, v.republished, v.repeats, v.repeatAttempts)
	fmt.Fprintf(&b, "  repeats          tool again %d (after its result was recorded %d); model again %d (after its response was recorded %d)\n",
		v.toolRepeats, v.toolDoubles, v.modelRepeats, v.modelDoubles)
	fmt.Fprintf(&b, "  callers          past the bound %d (still in Run %d)\n", v.waited, v.stuck)
	for _, k := range slices.Sorted(maps.Keys(v.samples)) {
		fmt.Fprintf(&b, "  e.g. %-11s %s\n", k+":", v.samples[k])
	}
	msgs := slices.SortedFunc(maps.Keys(v.logMessages), func(a, b string) int { return v.logMessages[b] - v.logMessages[a] })
	for i, m := range msgs {
		if i == 8 {
			break
		}
		fmt.Fprintf(&b, "  log %6d × %s\n", v.logMessages[m], m)
	}
	b.WriteString("  | pair | outages | runs | completed | parked | replayed | lost (unseen) | dead letters lost | recovery p50 | p99 |\n")
	fmt.Fprintf(&b, "  | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %s | %s |\n", cfg.name, len(v.outages), v.runs, v.completed, v.parkedRuns, v.replayed,
		v.lost, v.unseen, max(v.dlMissing, v.dlDropped), percentile(rec, 50).Round(time.Millisecond), percentile(rec, 99).Round(time.Millisecond))
	t.Log(b.String())

	without := v.runs - v.completed
	if cfg.parkedOK {
		without -= v.replayed
	}
	if without > 0 {
		t.Errorf("%d of %d runs did not give their caller the correct output: %v; after the load %d completed unseen, %d were replayed home, %d are lost %v",
			without, v.runs, v.kinds, v.unseen, v.replayed, v.lost, v.lostByStatus)
	}
	if v.lost > 0 {
		t.Errorf("%d runs lost: they ended nowhere even after every dead letter was replayed", v.lost)
	}
	if v.dlMissing+v.dlDropped > 0 {
		t.Errorf("dead letters lost: %d parked but not recorded, %d dropped", v.dlMissing, v.dlDropped)
	}
	if v.unpublished > 0 {
		t.Errorf("%d completed runs never published their output", v.unpublished)
	}
	if v.toolDoubles > 0 || v.modelDoubles > 0 {
		t.Errorf("recorded steps done again: %d tool executions after the tool's result was recorded, %d model calls after the response was recorded", v.toolDoubles, v.modelDoubles)
	}
	if cfg.once && (v.toolRepeats > 0 || v.modelRepeats > 0) {
		t.Errorf("calls made twice with every worker alive: %d tool executions, %d model requests", v.toolRepeats, v.modelRepeats)
	}
	if v.waited > 0 {
		t.Errorf("%d callers waited past the end of the load plus %s (%d still in Run)", v.waited, cfg.grace, v.stuck)
	}
	if v.notServed > 0 {
		t.Errorf("%d runs cancelled as not served", v.notServed)
	}
	if unrecovered > 0 {
		t.Errorf("%d outages were never recovered from", unrecovered)
	}
	if cfg.killWorkers && cfg.killRecovery > 0 && percentile(rec, 99) >= cfg.killRecovery {
		t.Errorf("recovery after a worker kill: p99 %s, want under %s", percentile(rec, 99).Round(time.Millisecond), cfg.killRecovery)
	}
	for _, o := range v.outages {
		if o.Err != "" {
			t.Errorf("outage %s of %s: %s", o.Action, o.Target, o.Err)
		}
	}
}
