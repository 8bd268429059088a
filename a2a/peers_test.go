package a2a_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/peers"
)

// nodeSteps runs a script of internal/peers/a2a with node 22, and returns
// the JSON lines it printed, by step.
func nodeSteps(t *testing.T, script string, args ...string) map[string]map[string]any {
	t.Helper()
	node := peers.Node(t)
	peers.Package(t, "@a2a-js/sdk/package.json")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(peers.Dir(), "a2a", script)}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	steps := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			t.Logf("node: %s", line)
			continue
		}
		steps[m["step"].(string)] = m
	}
	return steps
}

// The @a2a-js/sdk client drives our server over JSON-RPC and REST: send,
// stream, get, cancel, and an unknown task.
func TestServerWithJSClient(t *testing.T) {
	rt := newRuntime(t, nil)
	release := make(chan struct{})
	defer close(release)
	srv := newA2AServer(t, rt, newHelper(t, rt, release), "t0k")
	for _, transport := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(transport, func(t *testing.T) {
			s := nodeSteps(t, "client.mjs", srv.URL, transport, "t0k")
			if got := s["send"]; got["state"] != "TASK_STATE_COMPLETED" || got["text"] != "done: hello from js" {
				t.Errorf("send: %v", got)
			}
			if got := s["stream"]; got["text"] != "done: stream from js" || got["last"] != "TASK_STATE_COMPLETED" {
				t.Errorf("stream: %v", got)
			}
			if got := s["get"]; got["state"] != "TASK_STATE_COMPLETED" || got["text"] != "done: hello from js" {
				t.Errorf("get: %v", got)
			}
			if got := s["cancel"]; got["state"] != "TASK_STATE_CANCELED" {
				t.Errorf("cancel: %v", got)
			} else if st, err := rt.LoadAgentRun(t.Context(), got["id"].(string)); err != nil || st.Status != "cancelled" {
				t.Errorf("the cancelled task's run: %+v, %v", st, err)
			}
			if got := s["unknown"]; !strings.Contains(strings.ToLower(got["error"].(string)), "not found") {
				t.Errorf("unknown task: %v", got)
			}
		})
	}
}

// buildA2ACLI builds the a2a command of the official Go SDK, in a module
// of its own (it needs gRPC, which Calf does not).
func buildA2ACLI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mod := "module a2acli\n\ngo 1.26\n\nrequire github.com/a2aproject/a2a-go/v2 v2.4.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-mod=mod", "-o", "a2a", "github.com/a2aproject/a2a-go/v2/cmd/a2a")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CALF_TEST_SERVICES") == "" {
			t.Skipf("cannot build the a2a command: %v\n%s", err, out)
		}
		t.Fatalf("build the a2a command: %v\n%s", err, out)
	}
	return filepath.Join(dir, "a2a")
}

// The a2a command of the official Go SDK discovers our server and sends
// to it, streaming and not.
func TestServerWithGoCLI(t *testing.T) {
	bin := buildA2ACLI(t)
	rt := newRuntime(t, nil)
	srv := newA2AServer(t, rt, newHelper(t, rt, nil), "")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("a2a %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("discover", srv.URL); !strings.Contains(out, "helper") || !strings.Contains(out, "Does things.") {
		t.Errorf("discover:\n%s", out)
	}
	for _, transport := range []string{"jsonrpc", "rest"} {
		if out := run("send", "--transport", transport, srv.URL, "hi from the cli"); !strings.Contains(out, "done: hi from the cli") {
			t.Errorf("send over %s:\n%s", transport, out)
		}
		if out := run("send", "--stream", "--transport", transport, srv.URL, "streamed"); !strings.Contains(out, "done: streamed") {
			t.Errorf("send --stream over %s:\n%s", transport, out)
		}
	}
}

// The @a2a-js/sdk client sends one message three times (send, stream,
// send) under one messageId: one task and one answer; another message
// under the messageId is refused.
func TestServerMessageIDWithJSClient(t *testing.T) {
	rt := newRuntime(t, nil)
	srv := newA2AServer(t, rt, newHelper(t, rt, nil), "")
	for _, transport := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(transport, func(t *testing.T) {
			s := nodeSteps(t, "keyed.mjs", srv.URL, transport)
			id := s["send1"]["id"]
			for _, step := range []string{"send1", "stream2", "send3"} {
				if got := s[step]; got["id"] != id || got["text"] != "done: keyed from js" {
					t.Errorf("%s: %v, want task %v answering %q", step, got, id, "done: keyed from js")
				}
			}
			if got, _ := s["other"]["error"].(string); !strings.Contains(got, "was sent before with another message") {
				t.Errorf("another message under the messageId: %v", s["other"])
			}
		})
	}
}
