package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/server"
)

// The official openai npm client talks to an agent: models, chat
// completions and responses, plain and streamed, in a session, and the
// errors of an unknown model, a failed run and a wrong key.
func TestOpenAINodeClient(t *testing.T) {
	node := peers.Node(t)
	peers.Package(t, "openai/package.json")
	hs, m, rt := newServer(t, &server.Options{Tokens: map[string]string{"peer-key": "peer"}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(peers.Dir(), "openai", "client.mjs"), hs.URL+"/v1", "peer-key", "echo")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("client:\n%s", out)
	steps := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s map[string]any
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		name := s["step"].(string)
		steps[name] = append(steps[name], s)
	}
	one := func(name string) map[string]any {
		t.Helper()
		if len(steps[name]) == 0 {
			t.Fatalf("no step %s in:\n%s", name, out)
		}
		return steps[name][0]
	}
	if ids := one("models")["ids"].([]any); len(ids) != 1 || ids[0] != "echo" {
		t.Errorf("models %v", ids)
	}
	if s := one("chat"); s["text"] != "you said: chat plain" || s["finish"] != "stop" || s["usage"].(map[string]any)["prompt_tokens"] != 10.0 {
		t.Errorf("chat %v", s)
	}
	if got := m.lastSeen(); got == "" {
		t.Error("the model saw nothing")
	}
	if s := one("chat-stream"); s["text"] != "you said: chat streamed" || s["chunks"].(float64) < 4 || s["usage"] == nil {
		t.Errorf("chat stream %v", s)
	}
	if s := one("responses"); s["text"] != "you said: responses plain" || s["status"] != "completed" {
		t.Errorf("responses %v", s)
	}
	s := one("responses-stream")
	if s["text"] != "you said: responses streamed" || s["final"] != "you said: responses streamed" || s["status"] != "completed" {
		t.Errorf("responses stream %v", s)
	}
	var types []string
	for _, v := range s["types"].([]any) {
		types = append(types, v.(string))
	}
	if !slices.Contains(types, "response.created") || types[len(types)-1] != "response.completed" {
		t.Errorf("responses stream events %v", types)
	}
	if s := one("responses-helper"); s["text"] != "you said: responses helper" {
		t.Errorf("responses helper %v", s)
	}
	if ss := steps["session"]; len(ss) != 2 || ss[1]["text"] != "you said: in session" {
		t.Errorf("session %v", ss)
	}
	if info, err := session.LoadInfo(t.Context(), rt.Store(), "peer-session"); err != nil || info.Runs != 2 {
		t.Errorf("the session: %+v, %v", info, err)
	}
	if s := one("unknown-model"); s["status"] != 404.0 || s["code"] != "model_not_found" {
		t.Errorf("unknown model %v", s)
	}
	if s := one("failed-stream"); !strings.Contains(s["message"].(string), "the model broke") {
		t.Errorf("failed stream %v", s)
	}
	if s := one("wrong-key"); s["status"] != 401.0 {
		t.Errorf("wrong key %v", s)
	}
}
