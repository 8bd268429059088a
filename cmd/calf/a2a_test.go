package main

import (
	"strings"
	"testing"
)

// calf a2a serve offers the agent over A2A; calf a2a send talks to it.
func TestA2AServeAndSend(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	got := runMain(t.Context(), "", "a2a", "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--addr", "0.0.0.0:0")
	if got.code != exitUsage || !strings.Contains(got.stderr, "bearer token") {
		t.Errorf("beyond loopback without a token: %d %q", got.code, got.stderr)
	}
	addr := freeAddr(t)
	serveInBackground(t, "a2a", "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--addr", addr, "--token", "tk")
	waitListening(t, addr)
	url := "http://" + addr
	for _, args := range [][]string{{"a2a", "send", "--token", "tk", url, "hello", "there"}, {"a2a", "send", "--no-stream", "--token", "tk", url, "plain"}} {
		got := runMain(t.Context(), "", args...)
		want := "You said: " + strings.Join(args[len(args)-2:], " ")
		if args[2] == "--no-stream" {
			want = "You said: plain"
		}
		if got.code != exitOK || strings.TrimSpace(got.stdout) != want {
			t.Errorf("calf %v: %d, stdout %q, stderr %q; want %q", args, got.code, got.stdout, got.stderr, want)
		}
	}
	if got := runMain(t.Context(), "", "a2a", "send", "--token", "wrong", url, "hi"); got.code == exitOK || !strings.Contains(got.stderr, "401") && !strings.Contains(strings.ToLower(got.stderr), "unauth") {
		t.Errorf("a wrong token: %d %q", got.code, got.stderr)
	}
	if got := runMain(t.Context(), "", "a2a", "send", "http://127.0.0.1:1", "hi"); got.code == exitOK || !strings.Contains(got.stderr, "agent card") {
		t.Errorf("no server: %d %q", got.code, got.stderr)
	}
}
