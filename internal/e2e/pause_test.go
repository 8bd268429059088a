package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// A run paused on NATS+PostgreSQL waits across a kill -9 of its worker,
// holding nothing but its state, and a new worker carries it out once
// the calf command resumes it from another process.
func TestPauseResumeAcrossRestartNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	calfBin := buildCalf(t)
	first := h.start(cfg)
	h.ready(first)
	c := newCaller(t, cfg)
	brokerURL := cfg.BrokerURL + "?stream=E2E_" + cfg.Namespace + "&prefix=e2e" + cfg.Namespace
	id := "paused-" + calf.NewID()[:12]
	// Paused before it starts: it starts, and stops before its first
	// model call.
	if out, err := runCalf(t, calfBin, "runs", "pause", "--store", cfg.StoreURL, "--broker", brokerURL, id); err == nil || !strings.Contains(out, "no agent, team or workflow run") {
		t.Fatalf("calf runs pause of a run not submitted: %v\n%s", err, out)
	}
	if _, err := c.rt.Pause(t.Context(), agent.RunRef{Name: cfg.Agent, RunID: id}, "maintenance"); err != nil {
		t.Fatal(err)
	}
	done := c.run(t, id)
	var st *agent.RunInfo
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = c.rt.LoadAgentRun(t.Context(), id); err == nil && st.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not pause: %+v, %v", id, st, err)
		}
	}
	if st.Step != 1 || len(h.modelCalls(id)) != 0 {
		t.Fatalf("paused at step %d after model calls %v", st.Step, h.modelCalls(id))
	}
	out, err := runCalf(t, calfBin, "runs", "list", "--store", cfg.StoreURL, "--status", "paused", "--agent", cfg.Agent)
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "maintenance") {
		t.Errorf("calf runs list --status paused: %v\n%s", err, out)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.waitExit(first)

	second := h.start(cfg)
	h.ready(second)
	if out, err := runCalf(t, calfBin, "runs", "resume", "--store", cfg.StoreURL, "--broker", brokerURL, id); err != nil || !strings.Contains(out, "status: running") {
		t.Fatalf("calf runs resume: %v\n%s", err, out)
	}
	r := await(t, id, done)
	checkW1(t, id, r)
	if n := h.count("tool_start", id); n != 1 {
		t.Errorf("the tool started %d times, want 1", n)
	}
	if calls := h.modelCalls(id); calls[1] != 1 || calls[2] != 1 {
		t.Errorf("model calls by step: %v, want one each", calls)
	}
}
