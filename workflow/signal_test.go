package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/workflow"
)

// waiter is a workflow whose node "wait" waits for the signal "go" (for
// at most timeout) and then for "more", and records what it got.
func waiter(t *testing.T, c *counts, timeout time.Duration) *workflow.Workflow[doc] {
	t.Helper()
	w, err := workflow.New[doc]("waiter", nil).
		Node("wait", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			c.add("wait")
			var v string
			ok, err := workflow.WaitSignal(ctx, "go", timeout, &v)
			if err != nil {
				return s, err
			}
			if !ok {
				v = "timed out"
			}
			s.Trail = append(s.Trail, v)
			var more int
			if _, err := workflow.WaitSignal(ctx, "more", 0, &more); err != nil {
				return s, err
			}
			s.N = more
			return s, nil
		})).
		Node("after", mark("after", c)).
		Edge(workflow.Start, "wait").Edge("wait", "after").Edge("after", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func ref(run string) agent.RunRef { return agent.RunRef{Kind: "workflow", Name: "waiter", RunID: run} }

// A node waits for signals sent to its run: the run shows what it waits
// for, each signal runs the node again, and its earlier waits return
// what they got.
func TestWaitSignal(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := waiter(t, &c, 0)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	waitingFor := func(name string) {
		t.Helper()
		testwait.For(t, 10*time.Second, "the run to wait for "+name, func() bool {
			info, err := w.LoadRun(t.Context(), rt, "r")
			return err == nil && info.WaitingFor == name
		})
	}
	waitingFor("go")
	if _, err := rt.Signal(t.Context(), ref("r"), "go", "green"); err != nil {
		t.Fatal(err)
	}
	waitingFor("more")
	if _, err := rt.Signal(t.Context(), ref("r"), "more", 7); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Trail: []string{"green", "after"}, N: 8}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if n := c.get()["wait"]; n != 3 {
		t.Errorf("the node ran %d times, want 3 (at the start, and after each signal)", n)
	}
	// Signals to an ended run, to an unknown one, and badly named.
	if _, err := rt.Signal(t.Context(), ref("r"), "go", 1); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("signal to an ended run: %v, want ErrRunEnded", err)
	}
	if _, err := rt.Signal(t.Context(), ref("nope"), "go", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("signal to an unknown run: %v, want not found", err)
	}
	if _, err := rt.Signal(t.Context(), ref("r"), "no spaces", 1); err == nil {
		t.Error("a signal named with a space was sent")
	}
}

// Signals sent before the run waits are kept, and taken in the order
// sent, each by one wait.
func TestSignalBeforeWait(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w, err := workflow.New[doc]("waiter", nil).
		Node("first", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			c.add("first")
			// Hold the run until both signals are sent.
			if _, err := workflow.WaitSignal(ctx, "start", 0, nil); err != nil {
				return s, err
			}
			return s, nil
		})).
		Node("take", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			for range 2 {
				var v string
				if _, err := workflow.WaitSignal(ctx, "item", 0, &v); err != nil {
					return s, err
				}
				s.Trail = append(s.Trail, v)
			}
			return s, nil
		})).
		Edge(workflow.Start, "first").Edge("first", "take").Edge("take", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the run to wait for start", func() bool {
		info, err := w.LoadRun(t.Context(), rt, "r")
		return err == nil && info.WaitingFor == "start"
	})
	for _, v := range []string{"one", "two"} {
		if _, err := rt.Signal(t.Context(), ref("r"), "item", v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.Signal(t.Context(), ref("r"), "start", nil); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one", "two"}, got.Trail); diff != "" {
		t.Errorf("taken (-want +got):\n%s", diff)
	}
}

// A wait with a timeout that no signal answers gets false at the
// timeout, from a timer.
func TestWaitSignalTimeout(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := waiter(t, &c, 300*time.Millisecond)
	serve(t, w, rt)
	start := time.Now()
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the run to wait for more", func() bool {
		info, err := w.LoadRun(t.Context(), rt, "r")
		return err == nil && info.WaitingFor == "more"
	})
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("the wait timed out after %s, before its 300ms", el)
	}
	if _, err := rt.Signal(t.Context(), ref("r"), "more", 1); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Trail: []string{"timed out", "after"}, N: 2}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}
