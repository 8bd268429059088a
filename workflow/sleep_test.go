package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/workflow"
)

// stamps records when each node ran.
type stamps struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (s *stamps) node(name string, sleep func(doc) error) workflow.Node[doc] {
	return workflow.Func(func(_ context.Context, d doc) (doc, error) {
		s.mu.Lock()
		if s.at == nil {
			s.at = map[string][]time.Time{}
		}
		s.at[name] = append(s.at[name], time.Now())
		s.mu.Unlock()
		d.Trail = append(d.Trail, name)
		if sleep != nil {
			return d, sleep(d)
		}
		return d, nil
	})
}

func (s *stamps) get(name string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[name]...)
}

func sleeper(t *testing.T, s *stamps, d time.Duration) *workflow.Workflow[doc] {
	t.Helper()
	w, err := workflow.New[doc]("sleeper", nil).
		Node("a", s.node("a", func(doc) error { return workflow.Sleep(d) })).
		Node("b", s.node("b", nil)).
		Edge(workflow.Start, "a").Edge("a", "b").Edge("b", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A node that sleeps has the next step start after the sleep, from a
// timer kept in the store: the run shows when it goes on, and the timer
// is gone once it fired.
func TestSleep(t *testing.T) {
	rt := newRuntime(t)
	var s stamps
	w := sleeper(t, &s, 400*time.Millisecond)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	var info *workflow.RunInfo
	testwait.For(t, 10*time.Second, "the run to sleep", func() bool {
		var err error
		info, err = w.LoadRun(t.Context(), rt, "r")
		return err == nil && !info.SleepingUntil.IsZero()
	})
	if info.Step != 2 || info.Node != "b" || info.Status != workflow.RunRunning {
		t.Errorf("sleeping run at step %d node %q status %s, want step 2, b, running", info.Step, info.Node, info.Status)
	}
	// The sleep is recorded, then its timer started.
	var ts []agent.Timer
	testwait.For(t, 10*time.Second, "the timer", func() bool {
		var err error
		ts, err = rt.Timers(t.Context(), "workflow/sleeper/r/")
		return err == nil && len(ts) > 0
	})
	if len(ts) != 1 || !ts[0].Due.Equal(info.SleepingUntil) || ts[0].EventID != "r.step.2.b" {
		t.Fatalf("timers %+v: want one, due at %s, for the event r.step.2.b", ts, info.SleepingUntil)
	}
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got.Trail); diff != "" {
		t.Errorf("trail (-want +got):\n%s", diff)
	}
	a, b := s.get("a"), s.get("b")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("a ran %d times, b %d, want once each", len(a), len(b))
	}
	if gap := b[0].Sub(a[0]); gap < 400*time.Millisecond {
		t.Errorf("b ran %s after a, before the sleep of 400ms ended", gap)
	}
	// The firer removes the timer once its event is out.
	testwait.For(t, 10*time.Second, "the fired timer to be removed", func() bool {
		ts, err := rt.Timers(t.Context(), "workflow/sleeper/r/")
		return err == nil && len(ts) == 0
	})
	end, _ := w.LoadRun(t.Context(), rt, "r")
	if !end.SleepingUntil.IsZero() {
		t.Errorf("a complete run sleeps until %s", end.SleepingUntil)
	}
}

// A run that sleeps through a restart of its only process goes on in the
// next one, from the timer in the store: the step after the sleep runs
// once, the node before it is not run again.
func TestSleepSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := memory.New(nil)
	client1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	var s stamps
	w := sleeper(t, &s, time.Second)
	serve(t, w, rt1)
	if _, err := w.Submit(t.Context(), rt1, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the run to sleep", func() bool {
		info, err := w.LoadRun(t.Context(), rt1, "r")
		return err == nil && !info.SleepingUntil.IsZero()
	})
	_ = client1.Close()
	_ = b1.Close()
	_ = st1.Close()

	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	serve(t, w, rt2)
	// The first process may have stopped between recording the sleep and
	// starting its timer: Recover starts it (once: it may exist).
	if _, err := w.Recover(t.Context(), rt2, nil); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt2, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got.Trail); diff != "" {
		t.Errorf("trail (-want +got):\n%s", diff)
	}
	if a, b := len(s.get("a")), len(s.get("b")); a != 1 || b != 1 {
		t.Errorf("a ran %d times, b %d, want once each", a, b)
	}
}

// A run cancelled while it sleeps ends at once: its timer is removed and
// the step after the sleep never runs.
func TestSleepCancelled(t *testing.T) {
	rt := newRuntime(t)
	var s stamps
	w := sleeper(t, &s, time.Hour)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the run to sleep", func() bool {
		info, err := w.LoadRun(t.Context(), rt, "r")
		return err == nil && !info.SleepingUntil.IsZero()
	})
	if _, err := rt.Cancel(t.Context(), agent.RunRef{Kind: "workflow", Name: "sleeper", RunID: "r"}, "no more"); err != nil {
		t.Fatal(err)
	}
	_, err := w.Wait(t.Context(), rt, "r")
	if !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("wait: %v, want cancelled", err)
	}
	testwait.For(t, 10*time.Second, "the timer to be removed", func() bool {
		ts, err := rt.Timers(t.Context(), "workflow/sleeper/r/")
		return err == nil && len(ts) == 0
	})
	if len(s.get("b")) != 0 {
		t.Error("b ran after the cancel")
	}
}

// A run paused while it sleeps and resumed after its wake time goes on at
// once; one resumed before it still waits for it.
func TestSleepPaused(t *testing.T) {
	rt := newRuntime(t)
	var s stamps
	w := sleeper(t, &s, 600*time.Millisecond)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	var info *workflow.RunInfo
	testwait.For(t, 10*time.Second, "the run to sleep", func() bool {
		var err error
		info, err = w.LoadRun(t.Context(), rt, "r")
		return err == nil && !info.SleepingUntil.IsZero()
	})
	wake := info.SleepingUntil
	if err := w.Pause(t.Context(), rt, "r", "hold"); err != nil {
		t.Fatal(err)
	}
	// The timer fires the step, which finds the pause and waits.
	testwait.For(t, 10*time.Second, "the pause to take effect", func() bool {
		info, err := w.LoadRun(t.Context(), rt, "r")
		return err == nil && info.Paused
	})
	if !time.Now().After(wake) {
		t.Fatalf("the pause took effect before the wake time")
	}
	if len(s.get("b")) != 0 {
		t.Fatal("b ran while paused")
	}
	if err := w.Resume(t.Context(), rt, "r"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got.Trail); diff != "" {
		t.Errorf("trail (-want +got):\n%s", diff)
	}
}

// In a parallel step, the join starts after the latest of its branches'
// sleeps.
func TestSleepParallel(t *testing.T) {
	rt := newRuntime(t)
	var s stamps
	w, err := workflow.New[doc]("fan", nil).
		Node("split", s.node("split", nil)).
		Node("x", s.node("x", func(doc) error { return workflow.Sleep(100 * time.Millisecond) })).
		Node("y", s.node("y", func(doc) error { return workflow.SleepUntil(time.Now().Add(700 * time.Millisecond)) })).
		Node("join", s.node("join", nil)).
		Edge(workflow.Start, "split").
		Parallel("split", []string{"x", "y"}, "join", func(base doc, branches []doc) (doc, error) {
			for _, b := range branches {
				base.Trail = append(base.Trail, b.Trail[len(b.Trail)-1])
			}
			return base, nil
		}).
		Edge("join", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"split", "x", "y", "join"}, got.Trail); diff != "" {
		t.Errorf("trail (-want +got):\n%s", diff)
	}
	y, join := s.get("y"), s.get("join")
	if len(y) != 1 || len(join) != 1 || join[0].Sub(y[0]) < 700*time.Millisecond {
		t.Errorf("join ran %v after y, before y's sleep of 700ms ended", join[0].Sub(y[0]))
	}
}
