package a2a_test

import (
	"context"
	"encoding/json"
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
			} else if st, err := rt.LoadRun(t.Context(), got["id"].(string)); err != nil || st.Status != "cancelled" {
				t.Errorf("the cancelled task's run: %+v, %v", st, err)
			}
			if got := s["unknown"]; !strings.Contains(strings.ToLower(got["error"].(string)), "not found") {
				t.Errorf("unknown task: %v", got)
			}
		})
	}
}
