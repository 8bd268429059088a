package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// calf replay runs a recorded run again without a model: the recorded
// answers come back, the tools run again.
func TestReplay(t *testing.T) {
	isolate(t)
	srv, fake := newFakeServer(t)
	dir := t.TempDir()
	note := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(note, []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "calf.db")
	got := runMain(t.Context(), "", "run", "--store", storeURL, "--model", srv.URL()+"#m", "--read", dir, "--json", "what does the note say?")
	if got.code != exitOK {
		t.Fatalf("calf run: %d %s", got.code, got.stderr)
	}
	run := between(got.stdout, `"run_id":"`, `"`)
	calls := len(fake.requests())
	srv.Close() // no model from here on
	if err := os.WriteFile(note, []byte("buy eggs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := runMain(t.Context(), "", "replay", "--store", storeURL, "--read", dir, run)
	if rep.code != exitOK {
		t.Fatalf("calf replay: %d %s", rep.code, rep.stderr)
	}
	if !strings.Contains(rep.stdout, "The note says: buy milk") {
		t.Errorf("the replayed answer: %q", rep.stdout)
	}
	// The tool ran again, on the file as it is now.
	if !strings.Contains(rep.stderr, "buy eggs") {
		t.Errorf("the tool's result in the replay: %q", rep.stderr)
	}
	if !strings.Contains(rep.stderr, "replayed: 2 of 2 model responses used; the answer is the recorded run's") {
		t.Errorf("the verdict: %q", rep.stderr)
	}
	if n := len(fake.requests()); n != calls {
		t.Errorf("the replay called the model: %d calls, %d before", n, calls)
	}
	if no := runMain(t.Context(), "", "replay", "--store", storeURL, "nope"); no.code == exitOK || !strings.Contains(no.stderr, "nope") {
		t.Errorf("an unknown run: %d %q", no.code, no.stderr)
	}
}

// calf replay leaves nothing in the store it reads the recording from,
// unless --keep, which records the replay as a run named after its source;
// a prototype's run is replayed as that prototype with --agents, and
// without it the command says what to give.
func TestReplayKeepsOutOfTheStoreAndReplaysPrototypes(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "calf.db")
	agents := filepath.Join(dir, "agents.yaml")
	writeFile(t, agents, `prototypes:
  - name: echoer
    role: Says what it was told
    model: `+srv.URL()+`#m
    system_prompt: Repeat the user.
`)
	got := runMain(t.Context(), "", "run", "--store", storeURL, "--agents", agents, "--json", "hello there")
	if got.code != exitOK {
		t.Fatalf("calf run --agents: %d %s", got.code, got.stderr)
	}
	run := between(got.stdout, `"run_id":"`, `"`)
	runs := func() string {
		t.Helper()
		r := runMain(t.Context(), "", "runs", "list", "--store", storeURL, "--json")
		if r.code != exitOK {
			t.Fatalf("calf runs list: %d %s", r.code, r.stderr)
		}
		return r.stdout
	}
	before := strings.Count(runs(), `"id"`)

	// Without --agents: what to give, not a replay by the wrong agent.
	no := runMain(t.Context(), "", "replay", "--store", storeURL, run)
	if no.code != exitUsage || !strings.Contains(no.stderr, "agent echoer") || !strings.Contains(no.stderr, "--agents FILE") {
		t.Errorf("replay of a prototype's run without --agents: %d %q", no.code, no.stderr)
	}
	rep := runMain(t.Context(), "", "replay", "--store", storeURL, "--agents", agents, run)
	if rep.code != exitOK || !strings.Contains(rep.stdout, "You said: hello there") || !strings.Contains(rep.stderr, "the answer is the recorded run's") {
		t.Fatalf("replay --agents: %d %q %q", rep.code, rep.stdout, rep.stderr)
	}
	if after := strings.Count(runs(), `"id"`); after != before {
		t.Errorf("the replay left %d runs in the store, want none", after-before)
	}
	kept := runMain(t.Context(), "", "replay", "--store", storeURL, "--agents", agents, "--keep", run)
	if kept.code != exitOK || !strings.Contains(kept.stderr, "recorded as run "+run+".replay.1") {
		t.Fatalf("replay --keep: %d %q", kept.code, kept.stderr)
	}
	if list := runs(); !strings.Contains(list, run+".replay.1") {
		t.Errorf("the kept replay is not listed:\n%s", list)
	}
	if again := runMain(t.Context(), "", "replay", "--store", storeURL, "--agents", agents, "--keep", run); !strings.Contains(again.stderr, "recorded as run "+run+".replay.2") {
		t.Errorf("a second kept replay: %d %q", again.code, again.stderr)
	}
}

// calf replay of a run the store does not hold says so, in the user's
// words, and exits with status 1.
func TestReplayNoSuchRun(t *testing.T) {
	isolate(t)
	got := runMain(t.Context(), "", "replay", "--store", "memory:", "nope")
	if got.code != exitFailure || !strings.Contains(got.stderr, "no such run: nope") || strings.Contains(got.stderr, "store:") {
		t.Errorf("exit %d, %s", got.code, got.stderr)
	}
}
