package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/workflow"
)

// gate is the first node of the gated workflow: it tells started when
// it begins and finishes once release is closed.
type gate struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{started: make(chan struct{}), release: make(chan struct{})} }

// gated is a workflow of three nodes, a, b and c, whose first waits for
// g's release.
func gated(c *counts, g *gate) *workflow.Workflow[doc] {
	return workflow.New[doc]("gated", nil).
		Node("a", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			g.once.Do(func() { close(g.started) })
			select {
			case <-g.release:
			case <-ctx.Done():
				return s, ctx.Err()
			}
			c.add("a")
			s.Trail = append(s.Trail, "a")
			s.N++
			return s, nil
		})).
		Node("b", mark("b", c)).
		Node("c", mark("c", c)).
		Edge(workflow.Start, "a").
		Edge("a", "b").
		Edge("b", "c").
		Edge("c", workflow.End).
		MustBuild()
}

// waitStarted waits for the gate's node to begin.
func (g *gate) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("node a did not start")
	}
}

// waitPaused waits for the pause of the run id of w to take effect, and
// returns the run's view then.
func waitPaused[S any](t *testing.T, w *workflow.Workflow[S], rt *agent.Runtime, id string) *workflow.RunInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		info, err := w.LoadRun(ctx, rt, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Paused {
			return info
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the pause of %s did not take effect: %+v", id, info)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func drain(t *testing.T, b *memory.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// A run paused while a node runs: the node finishes and its checkpoint is
// written, the next node does not start, Wait goes on waiting; resumed
// from another process, the run finishes with every node run once.
func TestPauseAndResume(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	g := newGate()
	w := gated(&c, g)
	serve(t, w, rt)
	ctx := t.Context()

	events := make(chan workflow.Event, 64)
	go func() {
		defer close(events)
		for ev, err := range w.RunStream(ctx, rt, doc{Text: "x"}, &workflow.RunOptions{RunID: "p"}) {
			if err != nil {
				t.Error(err)
				return
			}
			events <- ev
		}
	}()
	g.waitStarted(t)
	if err := w.Pause(ctx, rt, "p", "review"); err != nil {
		t.Fatal(err)
	}
	if info, err := w.LoadRun(ctx, rt, "p"); err != nil || info.Pause == nil || info.Paused || info.Pause.Reason != "review" {
		t.Fatalf("asked to pause: %+v, %v", info, err)
	}
	if s, err := runner.Summarize(ctx, rt.Store(), "p"); err != nil || s.Status != "pausing" || s.Reason != "review" {
		t.Errorf("summary while pausing: %+v, %v", s, err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := w.Wait(ctx, rt, "p")
		waited <- err
	}()
	close(g.release)
	info := waitPaused(t, w, rt, "p")
	if info.Step != 2 || info.Node != "b" || info.Checkpoint != 1 || info.LastNode != "a" || info.Pause.Step != 2 ||
		info.Pause.PausedAt.IsZero() || info.Status != workflow.RunRunning {
		t.Errorf("paused run: %+v, pause %+v", info, info.Pause)
	}
	drain(t, b)
	if diff := cmp.Diff(map[string]int{"a": 1}, c.get()); diff != "" {
		t.Errorf("node runs while paused (-want +got):\n%s", diff)
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned while the run is paused: %v", err)
	default:
	}
	if s, err := runner.Summarize(ctx, rt.Store(), "p"); err != nil || s.Status != "paused" || s.Reason != "review" {
		t.Errorf("summary while paused: %+v, %v", s, err)
	}
	if cps, err := w.Checkpoints(ctx, rt, "p"); err != nil || len(cps) != 2 || cps[1].Node != "a" {
		t.Errorf("checkpoints while paused: %+v, %v", cps, err)
	}
	if err := w.Pause(ctx, rt, "p", "again"); err != nil {
		t.Errorf("pausing a paused run: %v", err)
	}

	other := runtimeOn(t, b, rt.Store()) // another process, on the same broker and store
	if err := w.Resume(ctx, other, "p"); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var kinds []string
	var final doc
	for ev := range events {
		k := string(ev.Kind)
		if ev.Kind == workflow.EventPause {
			k = "paused"
			if !ev.Pause.Paused {
				k = "resumed"
			} else if ev.Pause.Reason != "review" || ev.Pause.Step != 2 {
				t.Errorf("pause event %+v", ev.Pause)
			}
		}
		kinds = append(kinds, k)
		if ev.Kind == workflow.EventOutput {
			if final, _ = w.DecodeOutput(ev.Output); final.N != 3 {
				t.Errorf("output %+v", ev.Output)
			}
		}
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "node_done paused resumed step") || !strings.HasSuffix(got, "output") {
		t.Errorf("events: %s", got)
	}
	if diff := cmp.Diff(doc{Text: "x", Trail: []string{"a", "b", "c"}, N: 3}, final); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if info, err := w.LoadRun(ctx, rt, "p"); err != nil || info.Pause != nil || info.Paused || info.Status != workflow.RunComplete {
		t.Errorf("ended run: %+v, %v", info, err)
	}
	if err := w.Pause(ctx, rt, "p", "late"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("pause of an ended run: %v", err)
	}
	if err := w.Resume(ctx, rt, "p"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("resume of an ended run: %v", err)
	}
	if err := w.Pause(ctx, rt, "nope", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pause of an unknown run: %v", err)
	}
}

// heldPublish holds back the messages hold selects, instead of publishing
// them, until release.
type heldPublish struct {
	calf.Broker
	mu   sync.Mutex
	hold func(*calf.Message) bool
	held []*calf.Message
}

func (h *heldPublish) Publish(ctx context.Context, msg *calf.Message) error {
	h.mu.Lock()
	if h.hold(msg) {
		h.held = append(h.held, msg)
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	return h.Broker.Publish(ctx, msg)
}

func (h *heldPublish) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// A pause asked after the next step's event was emitted and before it
// was handled takes effect there: the node does not start.
func TestPauseBeforeTheNextNodeStarts(t *testing.T) {
	inner := memory.New(nil)
	t.Cleanup(func() { _ = inner.Close() })
	b := &heldPublish{Broker: inner, hold: func(m *calf.Message) bool { return strings.HasSuffix(m.ID, ".step.2.b") }}
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	w := linear(t, &c, "a", "b", "c")
	serve(t, w, rt)
	ctx := t.Context()
	if _, err := w.Submit(ctx, rt, doc{}, &workflow.RunOptions{RunID: "d"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); b.count() == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the step of b was not emitted")
		}
	}
	if err := w.Pause(ctx, rt, "d", "hold on"); err != nil {
		t.Fatal(err)
	}
	if err := inner.Publish(ctx, b.held[0]); err != nil { // delivered late
		t.Fatal(err)
	}
	info := waitPaused(t, w, rt, "d")
	drain(t, inner)
	if info.Step != 2 || info.Node != "b" || c.get()["b"] != 0 {
		t.Fatalf("paused run: %+v; node runs %v", info, c.get())
	}
	if err := w.Resume(ctx, rt, "d"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(ctx, rt, "d")
	if err != nil || !cmp.Equal(got.Trail, []string{"a", "b", "c"}) {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

// A paused run is cancelled: it ends cancelled, its next node never runs,
// and Wait returns the cancellation.
func TestPauseThenCancel(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	g := newGate()
	w := gated(&c, g)
	serve(t, w, rt)
	ctx := t.Context()
	if _, err := w.Submit(ctx, rt, doc{}, &workflow.RunOptions{RunID: "pc"}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t)
	if err := w.Pause(ctx, rt, "pc", "wait"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	waitPaused(t, w, rt, "pc")
	if err := w.Cancel(ctx, rt, "pc", "not needed"); err != nil {
		t.Fatal(err)
	}
	_, err := w.Wait(ctx, rt, "pc")
	if !errors.Is(err, agent.ErrRunCancelled) || !strings.Contains(err.Error(), "not needed") {
		t.Fatalf("Wait = %v, want a cancellation", err)
	}
	drain(t, b)
	info, err := w.LoadRun(ctx, rt, "pc")
	if err != nil || info.Status != workflow.RunCancelled || info.Paused {
		t.Errorf("cancelled run: %+v, %v", info, err)
	}
	if diff := cmp.Diff(map[string]int{"a": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if err := w.Resume(ctx, rt, "pc"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("resume of a cancelled run: %v", err)
	}
}

// The resume is recorded and its first event's publish fails: Resume
// returns the error, and Resume again emits what it had not; the node
// runs once. Resumes delivered and published twice, and a resume from a
// process without the workflow's definition, change nothing more.
func TestResumeAgain(t *testing.T) {
	inner := memory.New(&memory.Options{Backoff: func(int) time.Duration { return 0 }})
	t.Cleanup(func() { _ = inner.Close() })
	b := &failingPublish{Broker: brokertest.DuplicateDeliveries(brokertest.DuplicatePublishes(inner, 2), 2), failed: map[string]bool{},
		fail: func(m *calf.Message) bool { return m.ID == "ra.resume.2.1" }}
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	g := newGate()
	w := gated(&c, g)
	serve(t, w, rt)
	ctx := t.Context()
	if _, err := w.Submit(ctx, rt, doc{}, &workflow.RunOptions{RunID: "ra"}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t)
	if err := w.Pause(ctx, rt, "ra", "wait"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	waitPaused(t, w, rt, "ra")
	// The pause's events handled (twice) before the resume: an event of
	// the run handled after it would emit what the resume has not, as
	// for any stale event.
	drain(t, inner)
	if err := w.Resume(ctx, rt, "ra"); err == nil {
		t.Fatal("the first resume's publish did not fail")
	}
	if info, err := w.LoadRun(ctx, rt, "ra"); err != nil || info.Paused || info.Pause != nil {
		t.Fatalf("resumed run: %+v, %v", info, err)
	}
	drain(t, inner)
	if c.get()["b"] != 0 {
		t.Fatalf("b ran without its step: %v", c.get())
	}
	if err := w.Resume(ctx, rt, "ra"); err != nil {
		t.Fatal(err)
	}
	nodef := runtimeOn(t, inner, rt.Store()) // no definition, no service
	if _, err := resumeWorkflowRun(ctx, nodef, "gated", "ra"); err != nil && !errors.Is(err, agent.ErrRunEnded) {
		t.Fatal(err)
	}
	got, err := w.Wait(ctx, rt, "ra")
	if err != nil || got.N != 3 {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	drain(t, inner)
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

// A run paused and resumed from a process without the workflow's
// definition (calf runs): the resume event it publishes is enough for a
// worker that serves the workflow to go on.
func TestPauseRunAndResumeRun(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	g := newGate()
	w := gated(&c, g)
	serve(t, w, rt)
	ctx := t.Context()
	if _, err := w.Submit(ctx, rt, doc{}, &workflow.RunOptions{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t)
	nodef := runtimeOn(t, b, rt.Store())
	info, err := pauseWorkflowRun(ctx, nodef, "gated", "r", "ops")
	if err != nil || info.Pause == nil || info.Paused || info.ID != "r" {
		t.Fatalf("PauseRun = %+v, %v", info, err)
	}
	close(g.release)
	waitPaused(t, w, rt, "r")
	drain(t, b)
	if info, err = resumeWorkflowRun(ctx, nodef, "gated", "r"); err != nil || info.Paused || info.Pause != nil {
		t.Fatalf("ResumeRun = %+v, %v", info, err)
	}
	if got, err := w.Wait(ctx, rt, "r"); err != nil || got.N != 3 {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if _, err := pauseWorkflowRun(ctx, nodef, "other", "r", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PauseRun of another workflow's run: %v", err)
	}
}

// An interrupted run asked to pause waits for its answer; the answered
// node runs, and the pause takes effect before the next.
func TestPauseWhileInterrupted(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt)
	ctx := t.Context()
	if _, err := w.Run(ctx, rt, doc{Text: "the plan"}, &workflow.RunOptions{RunID: "i"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}
	if err := w.Pause(ctx, rt, "i", "later"); err != nil {
		t.Fatal(err)
	}
	if s, err := runner.Summarize(ctx, rt.Store(), "i"); err != nil || s.Status != "interrupted" {
		t.Errorf("summary of an interrupted run asked to pause: %+v, %v", s, err)
	}
	if err := w.Answer(ctx, rt, "i", "yes"); err != nil {
		t.Fatal(err)
	}
	info := waitPaused(t, w, rt, "i")
	if info.Node != "b" || c.get()["approve"] != 1 || c.get()["b"] != 0 {
		t.Fatalf("paused run: %+v; node runs %v", info, c.get())
	}
	if err := w.Resume(ctx, rt, "i"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(ctx, rt, "i")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "the plan (yes)", Trail: []string{"a", "b"}, N: 2}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// A paused run survives its worker: another, on the same durable store,
// finds it paused (Recover leaves it alone) and resumes it.
func TestPauseSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := memory.New(nil)
	client1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	var c counts
	g := newGate()
	w := gated(&c, g)
	serve(t, w, rt1)
	if _, err := w.Submit(t.Context(), rt1, doc{}, &workflow.RunOptions{RunID: "s"}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t)
	if err := w.Pause(t.Context(), rt1, "s", "overnight"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	waitPaused(t, w, rt1, "s")
	drain(t, b1)
	_ = client1.Close()
	_ = b1.Close()
	_ = st1.Close()

	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	serve(t, w, rt2)
	if n, err := w.Recover(t.Context(), rt2, nil); err != nil || n != 0 {
		t.Errorf("Recover = %d, %v: a paused run waits for its resume", n, err)
	}
	if info := waitPaused(t, w, rt2, "s"); info.Pause.Reason != "overnight" {
		t.Errorf("paused run after the restart: %+v", info)
	}
	if err := w.Resume(t.Context(), rt2, "s"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt2, "s")
	if err != nil || got.N != 3 {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

// fanned is a workflow: split, then x and y in parallel, then join. The
// node named hold (split, or both branches) tells started when it begins
// and waits for release.
func fanned(t *testing.T, c *counts, hold string, started chan<- string, release <-chan struct{}) *workflow.Workflow[doc] {
	t.Helper()
	node := func(name string) workflow.Node[doc] {
		return workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			if name == hold || hold == "branches" && (name == "x" || name == "y") {
				started <- name
				select {
				case <-release:
				case <-ctx.Done():
					return s, ctx.Err()
				}
			}
			c.add(name)
			s.Trail = append(s.Trail, name)
			return s, nil
		})
	}
	return workflow.New[doc]("fanned", nil).
		Node("split", node("split")).Node("x", node("x")).Node("y", node("y")).Node("join", node("join")).
		Edge(workflow.Start, "split").
		Parallel("split", []string{"x", "y"}, "join", func(base doc, bs []doc) (doc, error) {
			for _, b := range bs {
				base.Trail = append(base.Trail, b.Trail[len(b.Trail)-1])
			}
			return base, nil
		}).
		Edge("join", workflow.End).
		MustBuild()
}

// A pause asked before a parallel step waits before all its branches;
// one asked while the branches run lets them all finish and waits before
// the join. Resumed, each runs once.
func TestPauseAroundParallelSteps(t *testing.T) {
	for _, tt := range []struct {
		hold     string // what runs when the pause is asked
		wait     int    // how many nodes tell they began
		step     int    // the step the pause takes effect before
		node     string
		fanOut   string
		ranPause map[string]int
	}{
		{hold: "split", wait: 1, step: 2, fanOut: "split", ranPause: map[string]int{"split": 1}},
		{hold: "branches", wait: 2, step: 3, node: "join", ranPause: map[string]int{"split": 1, "x": 1, "y": 1}},
	} {
		t.Run(tt.hold, func(t *testing.T) {
			b := memory.New(nil)
			t.Cleanup(func() { _ = b.Close() })
			rt := runtimeOn(t, b, storemem.New())
			var c counts
			started, release := make(chan string, 4), make(chan struct{})
			w := fanned(t, &c, tt.hold, started, release)
			serve(t, w, rt)
			ctx := t.Context()
			if _, err := w.Submit(ctx, rt, doc{}, &workflow.RunOptions{RunID: "f"}); err != nil {
				t.Fatal(err)
			}
			for range tt.wait {
				<-started
			}
			if err := w.Pause(ctx, rt, "f", "look"); err != nil {
				t.Fatal(err)
			}
			close(release)
			info := waitPaused(t, w, rt, "f")
			drain(t, b)
			if info.Step != tt.step || info.Node != tt.node || info.FanOut != tt.fanOut {
				t.Errorf("paused at %+v", info.Position)
			}
			if diff := cmp.Diff(tt.ranPause, c.get()); diff != "" {
				t.Errorf("node runs while paused (-want +got):\n%s", diff)
			}
			if err := w.Resume(ctx, rt, "f"); err != nil {
				t.Fatal(err)
			}
			got, err := w.Wait(ctx, rt, "f")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"split", "x", "y", "join"}, got.Trail); diff != "" {
				t.Errorf("trail (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{"split": 1, "x": 1, "y": 1, "join": 1}, c.get()); diff != "" {
				t.Errorf("node runs (-want +got):\n%s", diff)
			}
		})
	}
}
