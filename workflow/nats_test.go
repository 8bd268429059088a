package workflow_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/workflow"
)

// On a durable broker no Recover is needed: a worker dies while a node
// runs, and when a worker starts again on the same broker directory and
// database, the broker redelivers the step that was cut short, the nodes
// that completed are not run again, and the run ends as a fault-free one.
func TestCrashOnDurableBroker(t *testing.T) {
	dir, path := t.TempDir(), filepath.Join(t.TempDir(), "calf.db")
	opts := &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }, AckWait: time.Second}
	var crash atomic.Bool
	started := make(chan struct{}, 1)
	var c counts

	b1, err := embedded.Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	client1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	crash.Store(true)
	w := crashable(t, &c, &crash, started)
	serve(t, w, rt1)
	id, err := w.Submit(t.Context(), rt1, doc{Text: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	_ = client1.Close()
	_ = b1.Close()
	_ = st1.Close()
	if got := c.get(); got["a"] != 1 || got["b"] != 1 || got["c"] != 0 {
		t.Fatalf("before the crash: %v", got)
	}

	crash.Store(false)
	b2, err := embedded.Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	serve(t, w, rt2)
	got, err := w.Wait(t.Context(), rt2, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "t", Trail: []string{"a", "b", "c", "d"}, N: 4}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

// On a durable broker that drops a message whose id it has seen lately,
// a pause that took effect where the next step's event arrived, and a
// worker restart: the resume's step events have ids of their own, so the
// run goes on in the new worker and every node runs once.
func TestPauseOnDurableBroker(t *testing.T) {
	dir, path := t.TempDir(), filepath.Join(t.TempDir(), "calf.db")
	opts := &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }, AckWait: time.Second}
	var c counts

	b1, err := embedded.Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldPublish{Broker: b1, hold: func(m *calf.Message) bool { return strings.HasSuffix(m.ID, ".step.2.b") }}
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	client1 := calf.NewClient(held, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	w := linear(t, &c, "a", "b", "c")
	serve(t, w, rt1)
	if _, err := w.Submit(t.Context(), rt1, doc{}, &workflow.RunOptions{RunID: "dp"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the step of b", func() bool { return held.count() > 0 })
	if err := w.Pause(t.Context(), rt1, "dp", "restart"); err != nil {
		t.Fatal(err)
	}
	if err := b1.Publish(t.Context(), held.held[0]); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, w, rt1, "dp")
	_ = client1.Close()
	_ = b1.Close()
	_ = st1.Close()
	if got := c.get(); got["a"] != 1 || got["b"] != 0 {
		t.Fatalf("before the restart: %v", got)
	}

	b2, err := embedded.Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	serve(t, w, rt2)
	if err := w.Resume(t.Context(), rt2, "dp"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := w.Wait(ctx, rt2, "dp")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Trail: []string{"a", "b", "c"}, N: 3}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}
