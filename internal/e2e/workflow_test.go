package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/workflow"
)

// A worker process serving a four-node workflow (a → b → c → d) is killed
// with SIGKILL as node c starts, after b's checkpoint is saved. A second
// worker process continues the run from the broker's redelivery of c's
// step: a and b do not run again, c runs once more (it started once in the
// dead worker), d runs once, the caller's Wait (begun before the crash)
// returns the final state, and the state and checkpoints equal those of a
// fault-free run.
func TestKillWorkflowWorker(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	fastFailover(cfg)
	wcfg := &workflowWorkerConfig{Kind: "linear", Name: "wf_linear_" + calf.NewID()[:8]}
	crashing := *wcfg
	crashing.CrashNode = "c"
	var runs []string
	c := newWorkflowCaller(t, cfg, wcfg, &runs)

	first := startWorkflowWorker(t, h, cfg, &crashing)
	id := "wf-crash-" + calf.NewID()[:12]
	runs = append(runs, id)
	if _, err := c.w.Submit(t.Context(), c.rt, wfState{}, &workflow.RunOptions{RunID: id}); err != nil {
		t.Fatal(err)
	}
	res := c.wait(t, id)
	crash := h.waitEvent("crash in "+id, func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
	if crash.PID != first.pid || crash.Point != "node_c" {
		t.Fatalf("crash %+v; want node_c in worker %d", crash, first.pid)
	}
	h.waitExit(first)

	// The dead worker saved the checkpoints of a and b, and started c.
	before, err := c.w.Checkpoints(t.Context(), c.rt, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 3 || before[2].Node != "b" || !cmp.Equal(before[2].State, wfState{Trail: []string{"a", "b"}}) {
		t.Fatalf("checkpoints before the second worker starts: %+v; want the input, a and b", before)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, countExecutions(executions(t, cfg.CrashDir, id), "start")); diff != "" {
		t.Fatalf("nodes started before the crash (-want +got):\n%s", diff)
	}

	second := startWorkflowWorker(t, h, cfg, wcfg)
	r := awaitWorkflow(t, id, res)
	if r.err != nil {
		t.Fatalf("Wait for run %s: %v", id, r.err)
	}

	// A fault-free run on the second worker.
	clean := "wf-clean-" + calf.NewID()[:12]
	runs = append(runs, clean)
	if _, err := c.w.Submit(t.Context(), c.rt, wfState{}, &workflow.RunOptions{RunID: clean}); err != nil {
		t.Fatal(err)
	}
	want := awaitWorkflow(t, clean, c.wait(t, clean))
	if want.err != nil {
		t.Fatalf("Wait for run %s: %v", clean, want.err)
	}
	h.stopAll()

	if diff := cmp.Diff(wfState{Trail: []string{"a", "b", "c", "d"}}, want.state); diff != "" {
		t.Errorf("state of the fault-free run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.state, r.state); diff != "" {
		t.Errorf("state after the crash differs from the fault-free run's (-fault-free +crashed):\n%s", diff)
	}
	if diff := cmp.Diff(checkpointSummary(t, c, clean), checkpointSummary(t, c, id)); diff != "" {
		t.Errorf("checkpoints after the crash differ from the fault-free run's (-fault-free +crashed):\n%s", diff)
	}

	ex := executions(t, cfg.CrashDir, id)
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 2, "d": 1}, countExecutions(ex, "start")); diff != "" {
		t.Errorf("node starts of the crashed run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, countExecutions(ex, "done")); diff != "" {
		t.Errorf("node completions of the crashed run (-want +got):\n%s", diff)
	}
	for _, e := range ex {
		wantPID := second.pid
		if e.node == "a" || e.node == "b" || (e.node == "c" && e.phase == "start" && e.pid == first.pid) {
			wantPID = first.pid
		}
		if e.pid != wantPID {
			t.Errorf("node %s (%s) ran in process %d; want %d (the first worker is %d)", e.node, e.phase, e.pid, wantPID, first.pid)
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, countExecutions(executions(t, cfg.CrashDir, clean), "done")); diff != "" {
		t.Errorf("node completions of the fault-free run (-want +got):\n%s", diff)
	}
}

// checkpointStep is what a checkpoint records, without times and ids.
type checkpointStep struct {
	Seq, Step int
	Node      string
	Next      string
	State     wfState
}

// checkpointSummary returns run's checkpoints as checkpointSteps.
func checkpointSummary(t *testing.T, c *workflowCaller, run string) []checkpointStep {
	t.Helper()
	cps, err := c.w.Checkpoints(t.Context(), c.rt, run)
	if err != nil {
		t.Fatal(err)
	}
	var out []checkpointStep
	for _, cp := range cps {
		out = append(out, checkpointStep{Seq: cp.Seq, Step: cp.Step, Node: cp.Node, Next: cp.Next.Node, State: cp.State})
	}
	return out
}

// A workflow run waits at an interrupt for an approval. The worker process
// that interrupted it is killed with SIGKILL; a new worker process starts,
// the caller resumes the run with its input, and the run completes on the
// new worker with the input in its state. Only the interrupted node runs
// again.
func TestWorkflowInterruptAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	fastFailover(cfg)
	wcfg := &workflowWorkerConfig{Kind: "approval", Name: "wf_approval_" + calf.NewID()[:8]}
	var runs []string
	c := newWorkflowCaller(t, cfg, wcfg, &runs)

	first := startWorkflowWorker(t, h, cfg, wcfg)
	id := "wf-approve-" + calf.NewID()[:12]
	runs = append(runs, id)
	if _, err := c.w.Submit(t.Context(), c.rt, wfState{}, &workflow.RunOptions{RunID: id}); err != nil {
		t.Fatal(err)
	}
	r := awaitWorkflow(t, id, c.wait(t, id))
	var ie *workflow.InterruptError
	if !errors.As(r.err, &ie) || !errors.Is(r.err, workflow.ErrInterrupted) {
		t.Fatalf("Wait for run %s = %+v, %v; want an interrupt", id, r.state, r.err)
	}
	if ie.RunID != id || ie.Info == nil || ie.Info.Node != "approve" || ie.Reason != "approve a?" {
		t.Fatalf("interrupt %+v (info %+v); want node approve of run %s asking %q", ie, ie.Info, id, "approve a?")
	}
	if st, err := c.w.LoadRun(t.Context(), c.rt, id); err != nil || st.Status != workflow.RunInterrupted {
		t.Fatalf("stored run: %+v, %v; want it interrupted", st, err)
	}

	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	h.waitExit(first)

	second := startWorkflowWorker(t, h, cfg, wcfg)
	if err := c.w.Answer(t.Context(), c.rt, id, "yes"); err != nil {
		t.Fatal(err)
	}
	r = awaitWorkflow(t, id, c.wait(t, id))
	if r.err != nil {
		t.Fatalf("Wait for run %s after Resume: %v", id, r.err)
	}
	if diff := cmp.Diff(wfState{Trail: []string{"a", "approve", "b"}, Input: "yes"}, r.state); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	if err := c.w.Answer(t.Context(), c.rt, id, "again"); err == nil || !strings.Contains(err.Error(), "not interrupted") {
		t.Errorf("resuming a complete run: %v; want an error", err)
	}
	h.stopAll()

	ex := executions(t, cfg.CrashDir, id)
	want := []execution{
		{"a", "start", first.pid}, {"a", "done", first.pid},
		{"approve", "start", first.pid}, {"approve", "interrupt", first.pid},
		{"approve", "start", second.pid}, {"approve", "done", second.pid},
		{"b", "start", second.pid}, {"b", "done", second.pid},
	}
	if diff := cmp.Diff(want, ex, cmp.AllowUnexported(execution{})); diff != "" {
		t.Errorf("node executions (-want +got) (first worker %d, second %d):\n%s", first.pid, second.pid, diff)
	}
}
