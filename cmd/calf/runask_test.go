package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// A model that edits notes.txt, then asks to run a command, then answers
// with what the command's result said.
func actingServer(t *testing.T) (*modeltest.Server, *[][]string) {
	t.Helper()
	var offered [][]string
	srv := modeltest.NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var names []string
		for _, d := range req.Tools {
			names = append(names, d.Name)
		}
		slices.Sort(names)
		offered = append(offered, names)
		switch n := len(req.Messages); {
		case req.Messages[n-1].Role == model.RoleUser:
			return modeltest.ToolCalls(modeltest.Call("c1", "edit_file", `{"path":"notes.txt","old_string":"milk","new_string":"oat milk"}`)), nil
		case req.Messages[n-1].ToolCallID == "c1":
			return modeltest.ToolCalls(modeltest.Call("c2", "bash", `{"command":"cat notes.txt"}`)), nil
		default:
			return modeltest.Text("Result: " + req.Messages[n-1].Text()), nil
		}
	})
	t.Cleanup(srv.Close)
	return srv, &offered
}

// calf run --edit --bash: the edit runs on its own (accept_edits), and
// the command waits for the answer read from standard input.
func TestRunAsksBeforeCommands(t *testing.T) {
	for _, tt := range []struct {
		name, stdin, want string
		ran               bool
	}{
		{"yes", "y\n", "Result: buy oat milk", true},
		{"no", "n\n", "Result: the call was denied by the person asked to approve it: the user refused", false},
		{"closed stdin", "", "no one was there to approve it", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			srv, offered := actingServer(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got := runMain(t.Context(), tt.stdin, "run", "--store", "memory:", "--model", srv.URL()+"#m",
				"--edit", dir, "--bash", dir, "tidy my notes")
			if got.code != exitOK {
				t.Fatalf("calf run = %d, stderr %q", got.code, got.stderr)
			}
			if !strings.Contains(got.stdout, tt.want) {
				t.Errorf("stdout %q, want it to contain %q", got.stdout, tt.want)
			}
			if !strings.Contains(got.stderr, `? bash {"command":"cat notes.txt"} needs approval (permission mode accept_edits asks before execute tools). Allow? [y/N]`) {
				t.Errorf("stderr does not ask:\n%s", got.stderr)
			}
			data, _ := os.ReadFile(filepath.Join(dir, "notes.txt"))
			if string(data) != "buy oat milk\n" {
				t.Errorf("notes.txt holds %q: the edit did not run on its own", data)
			}
			if diff := cmp.Diff([]string{"bash", "edit_file", "glob", "grep", "list_dir", "read_file", "write_file"}, (*offered)[0]); diff != "" {
				t.Errorf("tools offered (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunModeFlag(t *testing.T) {
	isolate(t)
	if got := runMain(t.Context(), "", "run", "--mode", "sometimes", "--model", "http://127.0.0.1:1/v1#m", "hi"); got.code != exitUsage || !strings.Contains(got.stderr, "--mode") {
		t.Errorf("--mode sometimes = %+v", got)
	}
	// bypass: the command runs without asking.
	srv, _ := actingServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--edit", dir, "--bash", dir, "--mode", "bypass", "tidy")
	if got.code != exitOK || !strings.Contains(got.stdout, "Result: buy oat milk") || strings.Contains(got.stderr, "needs approval") {
		t.Errorf("--mode bypass = %+v", got)
	}
}

// calf run --hook: an operator's command decides about the agent's tool
// calls without a rebuild, and what it stopped shows in the run's view.
func TestRunHookFlag(t *testing.T) {
	isolate(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", []string{"--hook", "pre_tool_use="}, exitUsage, "use EVENT[:MATCHER]=COMMAND"},
		{"no event", []string{"--hook", "=/bin/true"}, exitUsage, "use EVENT[:MATCHER]=COMMAND"},
		{"unknown event", []string{"--hook", "before_lunch=/bin/true"}, exitUsage, `unknown event "before_lunch"`},
		{"bad matcher", []string{"--hook", "pre_tool_use:[=/bin/true"}, exitUsage, "matcher"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runMain(t.Context(), "", append(append([]string{"run", "--store", "memory:", "--model", "http://127.0.0.1:1/v1#m"}, tt.args...), "hi")...)
			if got.code != tt.code || !strings.Contains(got.stderr, tt.want) {
				t.Errorf("calf run %v = %d, stderr %q; want %d and %q", tt.args, got.code, got.stderr, tt.code, tt.want)
			}
		})
	}
	// A policy that denies bash and lets the edit through.
	policy := filepath.Join(t.TempDir(), "no-shell")
	script := "#!/bin/sh\ncat >/dev/null\necho '{\"action\":\"deny\",\"reason\":\"no shell commands here\"}'\n"
	if err := os.WriteFile(policy, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, _ := actingServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--edit", dir, "--bash", dir, "--mode", "bypass",
		"--hook", "pre_tool_use:bash="+policy, "tidy")
	if got.code != exitOK || !strings.Contains(got.stdout, "Result: the call was denied by no-shell: no shell commands here") {
		t.Errorf("calf run --hook = %+v", got)
	}
	if !strings.Contains(got.stderr, "⚑ pre_tool_use: no-shell deny: no shell commands here") {
		t.Errorf("the denial is not shown:\n%s", got.stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(data) != "buy oat milk\n" {
		t.Errorf("notes.txt holds %q: the hook stopped the edit it does not match", data)
	}
}

// On the embedded default (memory://, the SQLite file), a calf run whose
// call waits for approval is answered from another terminal: calf
// approvals approve, with no broker, records the answer in the store, and
// the waiting calf run carries it out.
func TestRunApprovedFromAnotherProcess(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	srv, _ := actingServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		// Standard input closed: the run says how to answer, and waits.
		done <- runMain(ctx, "", "run", "--model", srv.URL()+"#m", "--edit", dir, "--bash", dir, "--timeout", "1m", "tidy my notes")
	}()
	var id string
	testwait.For(t, 30*time.Second, "an approval request listed", func() bool {
		select {
		case got := <-done:
			t.Fatalf("calf run ended before its call was approved: %+v", got)
		default:
		}
		l := runMain(ctx, "", "approvals", "list", "--json")
		if l.code != exitOK {
			t.Fatalf("calf approvals list = %+v", l)
		}
		if line, _, _ := strings.Cut(l.stdout, "\n"); line != "" {
			var a struct{ ID string }
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatal(err)
			}
			id = a.ID
		}
		return id != ""
	})
	ans := runMain(ctx, "", "approvals", "approve", id)
	if ans.code != exitOK || !strings.Contains(ans.stdout, "approved "+id+": bash") || !strings.Contains(ans.stdout, "recorded in the store") {
		t.Fatalf("calf approvals approve = %+v", ans)
	}
	var got result
	select {
	case got = <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("calf run did not end after the approval")
	}
	if got.code != exitOK || !strings.Contains(got.stdout, "Result: buy oat milk") {
		t.Fatalf("calf run = %+v", got)
	}
	if want := "waiting: answer from another terminal with calf approvals approve (or deny) " + id; !strings.Contains(got.stderr, want) {
		t.Errorf("calf run's stderr does not say %q:\n%s", want, got.stderr)
	}
}
