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
