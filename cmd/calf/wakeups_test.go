package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
)

// calf wakeups lists a session's follow-ups and cancels one.
func TestWakeUpsCommands(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	rt := agent.NewRuntime(c, st, nil)
	data, _ := json.Marshal(agent.InputEvent{Content: agent.WakeUpNotePrefix + "check the build"})
	id := "wakeup/minder/s1/r1/call_1"
	if _, err := rt.StartTimer(ctx, agent.Timer{ID: id, Due: time.Now().Add(time.Hour), Channel: agent.InputChannel("minder"), Data: data,
		Metadata: calf.Metadata{RunID: "wake-r1-call_1", SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	_ = b.Close()
	_ = st.Close()

	l := runMain(ctx, "", "wakeups", "list", "--store", storeURL, "--agent", "minder", "--session", "s1")
	if l.code != exitOK || !strings.Contains(l.stdout, id) || !strings.Contains(l.stdout, "check the build") {
		t.Fatalf("list = %+v", l)
	}
	if r := runMain(ctx, "", "wakeups", "list", "--store", storeURL, "--agent", "minder"); r.code != exitUsage {
		t.Errorf("list without --session = %+v", r)
	}
	if r := runMain(ctx, "", "wakeups", "cancel", "--store", storeURL, id); r.code != exitOK || !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("cancel = %+v", r)
	}
	if r := runMain(ctx, "", "wakeups", "cancel", "--store", storeURL, id); r.code != exitFailure {
		t.Errorf("cancel again = %+v", r)
	}
	if l := runMain(ctx, "", "wakeups", "list", "--store", storeURL, "--agent", "minder", "--session", "s1"); strings.Contains(l.stdout, id) {
		t.Errorf("list after cancel = %+v", l)
	}
}
