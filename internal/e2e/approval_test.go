package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
)

// A run waits for approval across a kill -9 of its worker: the request
// stays in the store, a new worker carries out the answer that the calf
// command gives from another process, and the tool runs exactly once; a
// second answer through the command is refused.
func TestApprovalAcrossKillNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	cfg.Approval = true
	calfBin := buildCalf(t)
	first := h.start(cfg)
	h.ready(first)
	c := newCaller(t, cfg)
	id := "approval-" + calf.NewID()[:12]
	done := c.run(t, id)
	brokerURL := cfg.BrokerURL + "?stream=E2E_" + cfg.Namespace + "&prefix=e2e" + cfg.Namespace
	var req approval.Approval
	testwait.For(t, waitTimeout, "calf approvals list to show the request of run "+id, func() bool {
		out, _ := runCalf(t, calfBin, "approvals", "list", "--store", cfg.StoreURL, "--run", id, "--json")
		line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if line == "" {
			return false
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("calf approvals list printed %q: %v", out, err)
		}
		return true
	})
	t.Cleanup(func() { _ = c.store.Delete(context.WithoutCancel(t.Context()), approval.Kind, req.ID, 0) })
	if req.Status != approval.Pending || req.ToolName != "add" {
		t.Fatalf("request %+v", req)
	}
	if n := h.count("tool_start", id); n != 0 {
		t.Fatalf("the tool started %d times before its approval", n)
	}
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	h.waitExit(first)

	second := h.start(cfg)
	h.ready(second)
	if out, err := runCalf(t, calfBin, "approvals", "approve", "--store", cfg.StoreURL, "--broker", brokerURL, req.ID); err != nil {
		t.Fatalf("calf approvals approve: %v\n%s", err, out)
	}
	r := await(t, id, done)
	checkW1(t, id, r)
	if n := h.count("tool_start", id); n != 1 {
		t.Errorf("the tool started %d times, want 1", n)
	}
	out, err := runCalf(t, calfBin, "approvals", "deny", "--store", cfg.StoreURL, "--broker", brokerURL, req.ID)
	if err == nil || !strings.Contains(out, "answered already") {
		t.Errorf("a second answer through the command: %v\n%s", err, out)
	}
	if _, err := approval.Respond(t.Context(), c.rt.Store(), c.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
		t.Errorf("a second answer: %v", err)
	}
}

// buildCalf builds the calf command for the test and returns its path.
func buildCalf(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "calf")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race") // reuses the test's compiled packages
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	cmd := exec.Command(goTool, append(args, "github.com/calf-go/calf/cmd/calf")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runCalf runs the calf command with args, and returns what it printed
// (standard output, then standard error).
func runCalf(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}
