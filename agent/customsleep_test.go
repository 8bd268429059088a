package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// A custom agent's step that sleeps has the run wait as a timer, then
// runs again at the wake time, where Sleep returns nil and the step's
// earlier calls are not made again; the run's state is kept across the
// sleep.
func TestCustomStepSleeps(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	var runs []time.Time
	var events atomic.Int64
	echo := tool.Must(tool.New("echo", "Echo.", func(_ context.Context, in struct{ Text string }) (string, error) {
		events.Add(1)
		return in.Text, nil
	}))
	c, err := agent.NewCustom("napper", func(sc *agent.StepContext[struct{}], in []model.Message) (string, error) {
		mu.Lock()
		runs = append(runs, time.Now())
		mu.Unlock()
		if _, err := sc.CallTool(echo, json.RawMessage(`{"Text":"before"}`)); err != nil {
			return "", err
		}
		if err := sc.Sleep(400 * time.Millisecond); err != nil {
			return "", err
		}
		return "woke after " + in[len(in)-1].Text(), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := c.Run(runCtx(t), e.rt, "a nap", &agent.RunOptions{RunID: "nap-1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "woke after a nap" {
		t.Errorf("output %q", out.Output)
	}
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("the run ended after %s, before its sleep of 400ms", el)
	}
	mu.Lock()
	n := len(runs)
	mu.Unlock()
	if n != 2 {
		t.Errorf("the step ran %d times, want 2 (before and after the sleep)", n)
	}
	if n := events.Load(); n != 1 {
		t.Errorf("the tool before the sleep ran %d times, want once", n)
	}
	testwait.For(t, 10*time.Second, "the fired timer to be removed", func() bool {
		ts, err := e.rt.Timers(t.Context(), "agent/napper/nap-1/")
		return err == nil && len(ts) == 0
	})
}

// A sleep outside a step is an error, not a wait.
func TestSleepOutsideStep(t *testing.T) {
	var sc agent.StepContext[struct{}]
	if err := sc.Sleep(time.Second); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("Sleep outside a step: %v", err)
	}
}

// A custom agent's step waits for a signal sent to its run, and one sent
// before it waits is kept for it; a wait with a timeout gets false at it.
func TestCustomStepWaitsForSignal(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c, err := agent.NewCustom("listener", func(sc *agent.StepContext[struct{}], in []model.Message) (string, error) {
		steps.Add(1)
		var a, b string
		if _, err := sc.WaitSignal("first", 0, &a); err != nil {
			return "", err
		}
		ok, err := sc.WaitSignal("second", 300*time.Millisecond, &b)
		if err != nil {
			return "", err
		}
		if !ok {
			b = "(timed out)"
		}
		return a + " " + b, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	ref := agent.RunRef{Name: "listener", RunID: "l-1"}
	if _, err := c.Submit(runCtx(t), e.rt, "listen", &agent.RunOptions{RunID: "l-1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the step to wait", func() bool { return steps.Load() == 1 })
	if _, err := e.rt.Signal(t.Context(), ref, "first", "hello"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Wait(runCtx(t), e.rt, "l-1")
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "hello (timed out)" {
		t.Errorf("output %q", out.Output)
	}
	if _, err := e.rt.Signal(t.Context(), ref, "first", "late"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("a signal to the ended run: %v", err)
	}
}
