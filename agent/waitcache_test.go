package agent_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
)

// A run that waits for a person's answer leaves the runtime's cache of run
// states (the room is for the runs in progress), and goes on from the store
// when the answer comes.
func TestRunWaitingForApprovalLeavesTheCache(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")
	done := startRun(t, a, e.rt, "r1")
	req := pending(t, e.rt, "r1")
	e.settle(t)
	if e.rt.RunCached("r1") {
		t.Error("the run waiting for approval is still cached")
	}
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("run: %+v, %v", r.out, r.err)
	}
	if runs.Load() != 1 {
		t.Errorf("the tool ran %d times", runs.Load())
	}
}

// So does a custom agent's run whose step waits for a signal.
func TestRunWaitingForSignalLeavesTheCache(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c, err := agent.NewCustom("listener", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
		steps.Add(1)
		var v string
		if _, err := sc.WaitSignal("go", 0, &v); err != nil {
			return "", err
		}
		return v, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(runCtx(t), e.rt, "listen", &agent.RunOptions{RunID: "l-1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the step to wait", func() bool { return steps.Load() == 1 })
	e.settle(t)
	if e.rt.RunCached("l-1") {
		t.Error("the run waiting for a signal is still cached")
	}
	if _, err := e.rt.Signal(t.Context(), agent.RunRef{Name: "listener", RunID: "l-1"}, "go", "hello"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Wait(runCtx(t), e.rt, "l-1")
	if err != nil || out.Output != "hello" {
		t.Fatalf("run: %+v, %v", out, err)
	}
}
