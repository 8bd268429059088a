package agent_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// Sweep removes the runs that ended before the cutoff with their tool
// results, approvals and run-scoped custom state; it keeps runs in
// progress, later runs and sessions. (The broker is not local, so that a
// tool's result has a record of its own: see TestWorkerStoreOperationsPerRun.)
func TestSweepRemovesOldRuns(t *testing.T) {
	e := newEnv(t, &envOptions{wrap: notLocal})
	a, _, _ := newW1(t, e)
	ctx := runCtx(t)
	for _, id := range []string{"old-1", "old-2"} {
		if _, err := a.Run(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Run(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: "in-session", SessionID: "keep"}); err != nil {
		t.Fatal(err)
	}
	// A custom agent with state, run outside a session: its state is the
	// run's.
	c := agent.Must(agent.NewCustom("tally", func(sc *agent.StepContext[tally], _ []model.Message) (string, error) {
		sc.State.Runs++
		return "ok", nil
	}, nil))
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, e.rt, "x", &agent.RunOptions{RunID: "custom-old"}); err != nil {
		t.Fatal(err)
	}
	cutoff := time.Now()
	time.Sleep(5 * time.Millisecond)
	if _, err := a.Run(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: "new"}); err != nil {
		t.Fatal(err)
	}
	// A run in progress, however old: paused before it starts.
	if _, err := e.rt.Pause(ctx, agent.RunRef{Name: "calculator", RunID: "waiting"}, "hold"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: "waiting"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	count := func(kind, prefix string) int {
		recs, err := e.store.List(ctx, kind, prefix, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := count(store.KindToolResult, "old-1/"); n != 1 {
		t.Fatalf("tool results of old-1 before the sweep: %d", n)
	}
	if n := count(agent.KindAgentState, "run:custom-old/"); n != 1 {
		t.Fatalf("custom state of custom-old before the sweep: %d", n)
	}
	res, err := e.rt.Sweep(ctx, agent.SweepOptions{Before: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 4 || res.Records < 4+2+1+1 {
		t.Errorf("sweep %+v; want the 4 runs that ended before the cutoff, with their records", res)
	}
	for _, id := range []string{"old-1", "old-2", "in-session", "custom-old"} {
		if _, err := e.rt.LoadState(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("run %s after the sweep: %v", id, err)
		}
	}
	for _, id := range []string{"new", "waiting"} {
		if _, err := e.rt.LoadState(ctx, id); err != nil {
			t.Errorf("run %s was removed: %v", id, err)
		}
	}
	if n := count(store.KindToolResult, "old-"); n != 0 {
		t.Errorf("%d tool results of removed runs remain", n)
	}
	if n := count(agent.KindAgentState, "run:custom-old/"); n != 0 {
		t.Errorf("%d state records of a removed run remain", n)
	}
	if s, err := session.Load(ctx, e.rt.Store(), "keep"); err != nil || len(s.Messages) == 0 {
		t.Errorf("the session of a removed run: %+v, %v", s, err)
	}
	// Nothing left to remove; a cutoff is required.
	if res, err := e.rt.Sweep(ctx, agent.SweepOptions{Before: cutoff}); err != nil || res.Runs != 0 {
		t.Errorf("a second sweep: %+v, %v", res, err)
	}
	if _, err := e.rt.Sweep(ctx, agent.SweepOptions{}); err == nil {
		t.Error("a sweep without a cutoff: no error")
	}
}

// A worker with a retention removes the runs that ended longer ago.
func TestWorkerRetention(t *testing.T) {
	mb := memory.New(nil)
	defer mb.Close()
	st := storemem.New()
	w := agent.NewWorker(mb, st, &agent.WorkerOptions{Retention: time.Millisecond, RetentionSweep: 10 * time.Millisecond})
	a := agent.Must(agent.New("echo", modeltest.NewTestModel(modeltest.Text("hi")), nil))
	if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	defer func() {
		stop()
		<-ran
	}()
	if _, err := a.Run(runCtx(t), w.Runtime(), "hello", &agent.RunOptions{RunID: "short-lived"}); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, 10*time.Second, "the run to be removed", func() error {
		_, err := st.Get(t.Context(), store.KindRun, "short-lived")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("the run is still there: %v", err)
	})
}

// With SweepOptions.Every, the processes that share a store sweep it once
// in that time at most, whichever of them comes first; a sweep without it
// is not held back.
func TestSweepEvery(t *testing.T) {
	e := newEnv(t, nil)
	var clock atomic.Pointer[time.Time]
	now := time.Now()
	clock.Store(&now)
	at := func() time.Time { return *clock.Load() }
	// Two processes on the same store, with the same clock.
	rt1 := agent.NewRuntime(e.client, e.store, &agent.RuntimeOptions{Now: at})
	rt2 := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, &agent.RuntimeOptions{Now: at})
	t.Cleanup(func() { _ = rt2.Client().Close() })
	a, _, _ := newW1(t, e)
	ctx := runCtx(t)
	run := func(id string) {
		t.Helper()
		if _, err := a.Run(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(id string) bool {
		t.Helper()
		_, err := e.store.Get(ctx, store.KindRun, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	sweep := func(rt *agent.Runtime, every time.Duration) *agent.SweepResult {
		t.Helper()
		res, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now().Add(time.Hour), Every: every})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	run("first")
	if res := sweep(rt1, time.Hour); res.Skipped || res.Runs != 1 || exists("first") {
		t.Fatalf("the first sweep: %+v; the run exists: %v", res, exists("first"))
	}
	run("second")
	for i, rt := range []*agent.Runtime{rt1, rt2} {
		if res := sweep(rt, time.Hour); !res.Skipped || res.Runs != 0 || !exists("second") {
			t.Errorf("process %d, a sweep within the hour: %+v; the run exists: %v", i+1, res, exists("second"))
		}
	}
	// An hour later, the other process sweeps, and records it.
	later := now.Add(time.Hour + time.Second)
	clock.Store(&later)
	if res := sweep(rt2, time.Hour); res.Skipped || res.Runs != 1 || exists("second") {
		t.Errorf("a sweep an hour later: %+v; the run exists: %v", res, exists("second"))
	}
	run("third")
	if res := sweep(rt1, time.Hour); !res.Skipped || !exists("third") {
		t.Errorf("a sweep right after the other process's: %+v", res)
	}
	// A sweep without Every is not held back.
	if res := sweep(rt1, 0); res.Skipped || res.Runs != 1 || exists("third") {
		t.Errorf("a sweep without Every: %+v; the run exists: %v", res, exists("third"))
	}
	// A record of a sweep dated far ahead (a wrong clock's) does not stop
	// the sweeps.
	ahead := now.Add(48 * time.Hour)
	clock.Store(&ahead)
	if res := sweep(rt1, time.Hour); res.Skipped {
		t.Errorf("a sweep under a clock a day ahead: %+v", res)
	}
	clock.Store(&later)
	if res := sweep(rt2, time.Hour); res.Skipped {
		t.Errorf("a sweep after a record dated a day ahead: %+v", res)
	}
}
