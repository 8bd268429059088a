package commandhook_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/commandhook"
)

// script writes a shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The program reads the input as JSON and its output is the decision;
// empty output allows, and anything else than a decision, a failure or
// too much output is an error (which denies).
func TestDecisions(t *testing.T) {
	in := agent.HookInput{Event: agent.HookPreToolUse, Agent: "a", RunID: "r1", ToolName: "write_file", Arguments: json.RawMessage(`{"path":"/etc/passwd"}`)}
	for _, tt := range []struct {
		name, body string
		want       agent.HookDecision
		err        string
	}{
		{"deny by input", `grep -q '"path":"/etc/passwd"' && echo '{"action":"deny","reason":"not there"}'`, agent.HookDecision{Action: agent.HookDeny, Reason: "not there"}, ""},
		{"silent allows", `cat >/dev/null`, agent.HookDecision{Action: agent.HookAllow}, ""},
		{"ask", `cat >/dev/null; echo '{"action":"ask","reason":"a person decides"}'`, agent.HookDecision{Action: agent.HookAsk, Reason: "a person decides"}, ""},
		{"transform", `cat >/dev/null; echo '{"action":"transform","arguments":{"path":"/tmp/x"}}'`, agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"path":"/tmp/x"}`)}, ""},
		{"crash keeps stderr", `echo 'no policy server' >&2; exit 3`, agent.HookDecision{}, "exit status 3: no policy server"},
		{"garbage", `echo 'yes please'`, agent.HookDecision{}, "printed no decision"},
		{"unknown field", `echo '{"action":"allow","verdict":"ok"}'`, agent.HookDecision{}, "printed no decision"},
		{"too much", `head -c 1100000 /dev/zero | tr '\0' ' '; echo '{}'`, agent.HookDecision{}, "printed more than 1048576 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := commandhook.New("policy", agent.HookPreToolUse, "write_*", []string{script(t, tt.body)}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != "policy" || h.Event != agent.HookPreToolUse || h.Matcher != "write_*" || h.Timeout != 5*time.Second {
				t.Errorf("hook %+v", h)
			}
			d, err := h.Func(t.Context(), in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.want.Action || d.Reason != tt.want.Reason || string(d.Arguments) != string(tt.want.Arguments) {
				t.Errorf("decision %+v, want %+v", d, tt.want)
			}
		})
	}
}

// A program's standard error is kept up to 4 KiB in the error.
func TestLongStderr(t *testing.T) {
	h, err := commandhook.New("x", agent.HookPreToolUse, "", []string{script(t, `head -c 100000 /dev/zero | tr '\0' 'e' >&2; exit 1`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Func(t.Context(), agent.HookInput{})
	if err == nil || !strings.Contains(err.Error(), "eeee") || len(err.Error()) > 5000 {
		t.Errorf("error of %d bytes: %.100v", len(err.Error()), err)
	}
}

// A hook without a program is not made; the argv given is copied.
func TestNew(t *testing.T) {
	for _, argv := range [][]string{nil, {""}} {
		if _, err := commandhook.New("x", agent.HookPreToolUse, "", argv, 0); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("argv %q: %v", argv, err)
		}
	}
	argv := []string{script(t, `cat >/dev/null`)}
	h, err := commandhook.New("x", agent.HookPreToolUse, "", argv, 0)
	if err != nil {
		t.Fatal(err)
	}
	argv[0] = "/nonexistent"
	if d, err := h.Func(t.Context(), agent.HookInput{}); err != nil || d.Action != agent.HookAllow {
		t.Errorf("after the caller's argv changed: %+v, %v", d, err)
	}
}
