package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testwait"
)

// calf run --record keeps the run's events; calf trace prints their tree.
func TestRunRecordAndTrace(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "calf.db")
	got := runMain(t.Context(), "", "run", "--store", storeURL, "--model", srv.URL()+"#m", "--read", dir, "--record", "--json", "what does the note say?")
	if got.code != exitOK {
		t.Fatalf("calf run: %d %s", got.code, got.stderr)
	}
	run := between(got.stdout, `"run_id":"`, `"`)
	if run == "" {
		t.Fatalf("no run id in %s", got.stdout)
	}
	tr := runMain(t.Context(), "", "trace", "--store", storeURL, run)
	if tr.code != exitOK {
		t.Fatalf("calf trace: %d %s", tr.code, tr.stderr)
	}
	lines := strings.Split(strings.TrimSpace(tr.stdout), "\n")
	want := []string{"run " + run, `└─ assistant input "what does the note say?"`, "model call 1", "tool call read_file", "tool result read_file success", "model call 2", "output complete"}
	if len(lines) != len(want) {
		t.Fatalf("trace has %d lines, want %d:\n%s", len(lines), len(want), tr.stdout)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q lacks %q", i, lines[i], w)
		}
	}
	// Each event sits under its cause, one level deeper.
	for i := 2; i < len(lines); i++ {
		if indent(lines[i]) <= indent(lines[i-1]) {
			t.Errorf("line %d is not under line %d:\n%s", i, i-1, tr.stdout)
		}
	}
	if !strings.Contains(lines[2], "deltas: Let me read it.") {
		t.Errorf("the first model call's text: %q", lines[2])
	}
	if no := runMain(t.Context(), "", "trace", "--store", storeURL, "nope"); no.code == exitOK || !strings.Contains(no.stderr, "no such run: nope") {
		t.Errorf("an unknown run: %d %q", no.code, no.stderr)
	}
}

// indent is where a trace line's label starts.
func indent(line string) int {
	return strings.IndexAny(line, "├└")
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// syncBuffer is a buffer for a command's output read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// calf events follows the agents' events on NATS as a run goes.
func TestEventsOnNATS(t *testing.T) {
	if got := runMain(t.Context(), "", "events"); got.code != exitUsage || !strings.Contains(got.stderr, "shared broker") {
		t.Errorf("without a broker: %d %q", got.code, got.stderr)
	}
	isolate(t)
	brokerURL := natsBrokerURL(t)
	srv, _ := newFakeServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"events", "--broker", brokerURL, "--agent", "assistant"}, strings.NewReader(""), &out, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("calf events exited %d: %s", code, errOut.String())
		}
	}()
	testwait.ForErr(t, 30*time.Second, "calf events to start", func() error {
		if s := errOut.String(); !strings.Contains(s, "following") {
			return fmt.Errorf("it wrote %q", s)
		}
		return nil
	})
	got := runMain(t.Context(), "", "run", "--broker", brokerURL, "--serve", "--store", "memory:", "--model", srv.URL()+"#m", "hello there")
	if got.code != exitOK {
		t.Fatalf("calf run: %d %s", got.code, got.stderr)
	}
	testwait.ForErr(t, 30*time.Second, "calf events to print the output", func() error {
		if s := out.String(); !strings.Contains(s, "output complete") {
			return fmt.Errorf("calf events printed:\n%s", s)
		}
		return nil
	})
	s := out.String()
	for _, w := range []string{"assistant", `input hello there`, "model call 1"} {
		if !strings.Contains(s, w) {
			t.Errorf("calf events printed no %q:\n%s", w, s)
		}
	}
}
