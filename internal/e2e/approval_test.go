package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// A run waits for approval across a kill -9 of its worker: the request
// stays in the store, a new worker carries out the answer given from
// another process (this one), and the tool runs exactly once.
func TestApprovalAcrossKillNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	cfg.Approval = true
	first := h.start(cfg)
	h.ready(first)
	c := newCaller(t, cfg)
	id := "approval-" + calf.NewID()[:12]
	done := c.run(t, id)
	var req agent.Approval
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(20 * time.Millisecond) {
		reqs, err := c.rt.Approvals(t.Context(), id, agent.ApprovalPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) == 1 {
			req = reqs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval request for run %s", id)
		}
	}
	t.Cleanup(func() { _ = c.store.Delete(t.Context(), agent.KindApproval, req.ID, 0) })
	if n := h.count("tool_start", id); n != 0 {
		t.Fatalf("the tool started %d times before its approval", n)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.waitExit(first)

	second := h.start(cfg)
	h.ready(second)
	if _, err := c.rt.AnswerApproval(t.Context(), req.ID, agent.ApprovalAnswer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r := await(t, id, done)
	checkW1(t, id, r)
	if n := h.count("tool_start", id); n != 1 {
		t.Errorf("the tool started %d times, want 1", n)
	}
	if _, err := c.rt.AnswerApproval(t.Context(), req.ID, agent.ApprovalAnswer{Approve: true, Digest: req.Digest}); !errors.Is(err, agent.ErrApprovalAnswered) {
		t.Errorf("a second answer: %v", err)
	}
}
