package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// Run on an agent that no process serves fails with ErrNotServed well
// before its timeout, names the agent and its input channel, and cancels
// the run so that a worker starting later does not carry it out.
func TestRunWithNoProcessServing(t *testing.T) {
	e := newEnv(t, nil)
	a := agent.Must(agent.New[agent.NoDeps, string]("lonely", modeltest.NewTestModel(modeltest.Text("hi")), nil))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := a.Run(ctx, e.rt, "anyone?", &agent.RunOptions[agent.NoDeps]{RunID: "r1"})
	if !errors.Is(err, agent.ErrNotServed) || !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("err = %v; want ErrNotServed and ErrRunCancelled", err)
	}
	for _, want := range []string{"lonely", "calf.agent.lonely.input", "WaitForWorkers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	st, err := e.rt.LoadRun(t.Context(), "r1")
	if err != nil || st.Status != agent.RunCancelled {
		t.Fatalf("run record %+v, %v; want cancelled", st, err)
	}

	// RunStream says the same, after the agent's own start timeout.
	a = agent.Must(agent.New[agent.NoDeps, string]("lonely", modeltest.NewTestModel(modeltest.Text("hi")), &agent.Options[agent.NoDeps]{StartTimeout: 50 * time.Millisecond}))
	var last error
	for _, err := range a.RunStream(runCtx(t), e.rt, "anyone?", nil) {
		last = err
	}
	if !errors.Is(last, agent.ErrNotServed) {
		t.Errorf("RunStream ended with %v; want ErrNotServed", last)
	}
}

// With WaitForWorkers, Run waits past the start timeout and completes once
// a process serves the agent.
func TestRunWaitsForWorkers(t *testing.T) {
	e := newEnv(t, nil)
	a := agent.Must(agent.New[agent.NoDeps, string]("patient", modeltest.NewTestModel(modeltest.Text("at last")), &agent.Options[agent.NoDeps]{StartTimeout: 20 * time.Millisecond}))
	type result struct {
		out *agent.Output[string]
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := a.Run(runCtx(t), e.rt, "hello?", &agent.RunOptions[agent.NoDeps]{RunID: "r1", WaitForWorkers: true})
		done <- result{out, err}
	}()
	// Nothing takes the run until the agent is served: it stays unknown.
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		if _, err := e.rt.LoadRun(t.Context(), "r1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the run exists before any process serves the agent: %v", err)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("Run returned before a worker started: %+v, %v", r.out, r.err)
	default:
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.out.Output != "at last" {
		t.Fatalf("Run = %+v, %v", r.out, r.err)
	}
}
