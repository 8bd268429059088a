package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
)

// putEndedRun stores, in the SQLite file at path, a run that completed at
// ended, with a tool result.
func putEndedRun(t *testing.T, path, id string, ended time.Time) {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A run's record as the handlers write it.
	data, err := json.Marshal(map[string]any{"run_id": id, "agent": agentName, "status": agent.RunComplete, "step": 1,
		"messages": []any{}, "started_at": ended.Add(-time.Second), "ended_at": ended})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.Put(ctx, store.KindRun, id, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, store.KindToolResult, id+"/call_1", []byte(`{}`), 0); err != nil {
		t.Fatal(err)
	}
}

// recordsOf returns which of the run id's records the SQLite file at path
// holds: "run", "tool_result".
func recordsOf(t *testing.T, path, id string) []string {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var kinds []string
	for _, k := range []struct{ kind, id string }{{store.KindRun, id}, {store.KindToolResult, id + "/call_1"}} {
		_, err := st.Get(context.Background(), k.kind, k.id)
		switch {
		case err == nil:
			kinds = append(kinds, k.kind)
		case !errors.Is(err, store.ErrNotFound):
			t.Fatal(err)
		}
	}
	return kinds
}

// calf run removes, as it starts, the runs that ended longer ago than
// --retention (a week by default), about once an hour at most across the
// processes that share the store; the run it makes is kept.
func TestRunRetention(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	path := filepath.Join(t.TempDir(), "calf.db")
	run := func(args ...string) {
		t.Helper()
		args = append([]string{"run", "--store", "sqlite:" + path, "--model", srv.URL() + "#m", "--json"}, args...)
		if got := runMain(t.Context(), "", args...); got.code != exitOK {
			t.Fatalf("calf %s = %d, stderr %q", strings.Join(args, " "), got.code, got.stderr)
		}
	}
	putEndedRun(t, path, "old", time.Now().Add(-8*24*time.Hour))
	putEndedRun(t, path, "recent", time.Now().Add(-6*24*time.Hour))
	run("hello")
	if got := recordsOf(t, path, "old"); len(got) != 0 {
		t.Errorf("the run that ended 8 days ago still has %v after calf run", got)
	}
	if got := recordsOf(t, path, "recent"); len(got) != 2 {
		t.Errorf("the run that ended 6 days ago has %v after calf run, want its run and tool result", got)
	}
	// Within the hour, calf run does not sweep again, whatever its
	// retention.
	putEndedRun(t, path, "old2", time.Now().Add(-8*24*time.Hour))
	run("--retention", "1h", "hello again")
	if got := recordsOf(t, path, "old2"); len(got) != 2 || len(recordsOf(t, path, "recent")) != 2 {
		t.Errorf("a sweep within the hour of the last: old2 has %v, recent %v", got, recordsOf(t, path, "recent"))
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.List(t.Context(), store.KindRun, "", "", 0)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 { // recent, old2, and the two runs made
		t.Errorf("%d runs stored, want 4", len(runs))
	}

	for _, cmd := range []string{"run", "chat"} {
		args := []string{cmd, "--store", "memory:", "--retention", "-1h"}
		if cmd == "run" {
			args = append(args, "hi")
		}
		if got := runMain(t.Context(), "", args...); got.code != exitUsage || !strings.Contains(got.stderr, "--retention must not be negative") {
			t.Errorf("calf %s --retention -1h = %d, stderr %q", cmd, got.code, got.stderr)
		}
	}
}
