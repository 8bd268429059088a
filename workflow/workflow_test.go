package workflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/store/storetest"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/workflow"
)

// doc is the state of the test workflows.
type doc struct {
	Text  string   `json:"text"`
	Trail []string `json:"trail"`
	N     int      `json:"n"`
}

// counts counts how many times each node ran to completion.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[node]++
}

func (c *counts) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps(c.m)
}

func maps(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mark returns a node that appends its name to the trail and counts itself.
func mark(name string, c *counts) workflow.Node[doc] {
	return workflow.Func(func(_ context.Context, s doc) (doc, error) {
		c.add(name)
		s.Trail = append(s.Trail, name)
		s.N++
		return s, nil
	})
}

func runtimeOn(t *testing.T, b calf.Broker, s store.Store) *agent.Runtime {
	t.Helper()
	client := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = client.Close() })
	return agent.NewRuntime(client, s, nil)
}

func newRuntime(t *testing.T) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	return runtimeOn(t, b, storemem.New())
}

func serve[S any](t *testing.T, w *workflow.Workflow[S], rt *agent.Runtime) {
	t.Helper()
	if err := w.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
}

func linear(t *testing.T, c *counts, nodes ...string) *workflow.Workflow[doc] {
	t.Helper()
	b := workflow.New[doc]("linear", nil)
	prev := workflow.Start
	for _, n := range nodes {
		b.Node(n, mark(n, c)).Edge(prev, n)
		prev = n
	}
	w, err := b.Edge(prev, workflow.End).Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestLinear(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := linear(t, &c, "a", "b", "c")
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{Text: "x"}, &workflow.RunOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "x", Trail: []string{"a", "b", "c"}, N: 3}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	cps, err := w.Checkpoints(t.Context(), rt, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for i, cp := range cps {
		if cp.Seq != i || cp.Step != i || cp.State.N != i {
			t.Errorf("checkpoint %d: seq %d step %d n %d", i, cp.Seq, cp.Step, cp.State.N)
		}
		nodes = append(nodes, cp.Node+">"+cp.Next.Node)
	}
	if want := []string{">a", "a>b", "b>c", "c>end"}; !slices.Equal(nodes, want) {
		t.Errorf("checkpoints = %q, want %q", nodes, want)
	}
	st, err := w.LoadRun(t.Context(), rt, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != workflow.RunComplete || st.Checkpoint != 3 {
		t.Errorf("stored run: status %s, checkpoint %d", st.Status, st.Checkpoint)
	}
}

func TestConditional(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w, err := workflow.New[doc]("cond", nil).
		Node("classify", mark("classify", &c)).
		Node("even", mark("even", &c)).
		Node("odd", mark("odd", &c)).
		Edge(workflow.Start, "classify").
		Route("classify", func(s doc) string {
			if s.N%2 == 0 {
				return "even"
			}
			return "odd"
		}, "even", "odd").
		Edge("even", workflow.End).
		Edge("odd", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w, rt)
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "odd"}, {1, "even"}} {
		got, err := w.Run(t.Context(), rt, doc{N: tc.n}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"classify", tc.want}; !slices.Equal(got.Trail, want) {
			t.Errorf("n=%d: trail %q, want %q", tc.n, got.Trail, want)
		}
	}
}

func loop(t *testing.T, c *counts, until, limit int) *workflow.Workflow[doc] {
	t.Helper()
	w, err := workflow.New[doc]("loop", nil).
		Node("write", mark("write", c)).
		Node("review", mark("review", c)).
		Edge(workflow.Start, "write").
		Edge("write", "review").
		Route("review", func(s doc) string {
			if s.N >= until {
				return workflow.End
			}
			return "write"
		}, "write", workflow.End).
		MaxVisits("write", limit).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestLoop(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := loop(t, &c, 6, 3)
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields("write review write review write review"); !slices.Equal(got.Trail, want) {
		t.Errorf("trail %q, want %q", got.Trail, want)
	}
}

func TestLoopBoundExceeded(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := loop(t, &c, 100, 3)
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"})
	if !errors.Is(err, workflow.ErrLimit) || !errors.Is(err, agent.ErrRunFailed) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if want := `node "write" would run 4 times, over its limit of 3`; !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	if got := c.get()["write"]; got != 3 {
		t.Errorf("write ran %d times, want 3", got)
	}
	// The work done before the bound is checkpointed.
	cps, err := w.Checkpoints(t.Context(), rt, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 7 || cps[6].State.N != 6 {
		t.Errorf("%d checkpoints, last state %+v", len(cps), cps[len(cps)-1].State)
	}
}

func TestMaxSteps(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w, err := workflow.New[doc]("spin", &workflow.Options{MaxSteps: 5}).
		Node("a", mark("a", &c)).
		Edge(workflow.Start, "a").
		Route("a", func(doc) string { return "a" }, "a").
		Build()
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w, rt)
	_, err = w.Run(t.Context(), rt, doc{}, nil)
	if !errors.Is(err, workflow.ErrLimit) || !strings.Contains(err.Error(), "more than 5 steps") {
		t.Fatalf("err = %v", err)
	}
}

// parallel builds split -> {x, y, z} -> join; the branches wait for each
// other at a barrier when barrier is set, so the test fails if they do not
// run at once.
func parallel(t *testing.T, c *counts, barrier *sync.WaitGroup) *workflow.Workflow[doc] {
	t.Helper()
	branch := func(name string) workflow.Node[doc] {
		return workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			if barrier != nil {
				barrier.Done()
				barrier.Wait()
			}
			info, _ := workflow.Info(ctx)
			c.add(name)
			s.Trail = []string{fmt.Sprintf("%s@%d", name, info.Step)}
			return s, nil
		})
	}
	w, err := workflow.New[doc]("par", nil).
		Node("split", mark("split", c)).
		Node("x", branch("x")).
		Node("y", branch("y")).
		Node("z", branch("z")).
		Node("join", mark("join", c)).
		Edge(workflow.Start, "split").
		Parallel("split", []string{"x", "y", "z"}, "join", func(base doc, branches []doc) (doc, error) {
			for _, b := range branches {
				base.Trail = append(base.Trail, b.Trail...)
			}
			return base, nil
		}).
		Edge("join", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestParallelJoin(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	var barrier sync.WaitGroup
	barrier.Add(3)
	w := parallel(t, &c, &barrier)
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"split", "x@2", "y@2", "z@2", "join"}; !slices.Equal(got.Trail, want) {
		t.Errorf("trail %q, want %q", got.Trail, want)
	}
	if got.N != 2 {
		t.Errorf("n = %d, want 2 (split and join; the branches' changes merge as the merge says)", got.N)
	}
	cps, err := w.Checkpoints(t.Context(), rt, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 4 || cps[2].Node != "x,y,z" || cps[2].Next.Node != "join" || cps[1].Next.FanOut != "split" {
		t.Errorf("checkpoints %+v", cps)
	}
}

func TestAgentNode(t *testing.T) {
	rt := newRuntime(t)
	m := modeltest.NewTestModel(modeltest.Text("A poem about cats."))
	writer := agent.Must(agent.New("writer", m, nil))
	if err := writer.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	var c counts
	w, err := workflow.New[doc]("poet", nil).
		Node("write", workflow.AgentNode(writer,
			func(s doc) (string, error) { return "Write about " + s.Text, nil },
			func(s doc, out string) (doc, error) { s.Text = out; return s, nil })).
		Node("after", mark("after", &c)).
		Edge(workflow.Start, "write").
		Edge("write", "after").
		Edge("after", workflow.End).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{Text: "cats"}, &workflow.RunOptions{RunID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "A poem about cats." || !slices.Equal(got.Trail, []string{"after"}) {
		t.Errorf("state %+v", got)
	}
	if reqs := m.Requests(); len(reqs) != 1 || reqs[0].Messages[len(reqs[0].Messages)-1].Text() != "Write about cats" {
		t.Errorf("model requests: %d", len(reqs))
	}
	child, err := rt.LoadAgentRun(t.Context(), "wf.1.write")
	if err != nil {
		t.Fatal(err)
	}
	if child.Parent != "wf" || child.Status != agent.RunComplete {
		t.Errorf("child run: parent %q status %s", child.Parent, child.Status)
	}
}

// poet is a workflow of one agent node, write, that asks writer to
// "Write" and keeps its answer as the text.
func poet(writer *agent.Agent[string]) *workflow.Workflow[doc] {
	return workflow.New[doc]("poet", nil).
		Node("write", workflow.AgentNode(writer,
			func(s doc) (string, error) { return "Write", nil },
			func(s doc, out string) (doc, error) { s.Text = out; return s, nil })).
		Edge(workflow.Start, "write").
		Edge("write", workflow.End).
		MustBuild()
}

func TestAgentNodeFailure(t *testing.T) {
	rt := newRuntime(t)
	m := modeltest.NewTestModel(errors.New("the model is down"))
	writer := agent.Must(agent.New("writer", m, nil))
	if err := writer.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	w := poet(writer)
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), `agent node "write"`) || !strings.Contains(err.Error(), "the model is down") {
		t.Fatalf("err = %v", err)
	}
}

func TestNodeError(t *testing.T) {
	rt := newRuntime(t)
	w := workflow.New[doc]("bad", nil).
		Node("a", workflow.Func(func(context.Context, doc) (doc, error) { return doc{}, errors.New("no luck") })).
		Edge(workflow.Start, "a").
		Edge("a", workflow.End).
		MustBuild()
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, nil)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Kind != "workflow" || re.Reason != `node "a": no luck` {
		t.Fatalf("err = %v", err)
	}
}

// crashable is a linear workflow a -> b -> c -> d whose node c, while
// crash is set, reports that it started and then blocks until its worker
// shuts down.
func crashable(t *testing.T, c *counts, crash *atomic.Bool, started chan<- struct{}) *workflow.Workflow[doc] {
	t.Helper()
	b := workflow.New[doc]("crashy", nil)
	prev := workflow.Start
	for _, n := range []string{"a", "b", "c", "d"} {
		node := mark(n, c)
		if n == "c" {
			node = workflow.Func(func(ctx context.Context, s doc) (doc, error) {
				if crash.Load() {
					started <- struct{}{}
					<-ctx.Done()
					return s, ctx.Err()
				}
				c.add(n)
				s.Trail = append(s.Trail, n)
				s.N++
				return s, nil
			})
		}
		b.Node(n, node).Edge(prev, n)
		prev = n
	}
	return b.Edge(prev, workflow.End).MustBuild()
}

func TestCrashAndRecover(t *testing.T) {
	// The fault-free run.
	var c0 counts
	var crash atomic.Bool
	rt0 := newRuntime(t)
	w0 := crashable(t, &c0, &crash, nil)
	serve(t, w0, rt0)
	want, err := w0.Run(t.Context(), rt0, doc{Text: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "calf.db")
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := memory.New(nil)
	client1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	var c counts
	crash.Store(true)
	started := make(chan struct{}, 1)
	w1 := crashable(t, &c, &crash, started)
	serve(t, w1, rt1)
	id, err := w1.Submit(t.Context(), rt1, doc{Text: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started // node c runs: a and b are checkpointed
	// The worker dies: its subscriptions stop (node c's context ends) and
	// the in-memory broker loses every event in flight.
	if err := client1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = b1.Close()
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := c.get(); got["a"] != 1 || got["b"] != 1 || got["c"] != 0 {
		t.Fatalf("before the crash: %v", got)
	}

	// A fresh worker on the same database.
	crash.Store(false)
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	w2 := crashable(t, &c, &crash, started)
	serve(t, w2, rt2)
	n, err := w2.Recover(t.Context(), rt2, nil)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 run", n, err)
	}
	got, err := w2.Wait(t.Context(), rt2, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state after recovery differs from a fault-free run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	// Recovering again finds nothing to do.
	if n, err := w2.Recover(t.Context(), rt2, nil); err != nil || n != 0 {
		t.Errorf("second Recover = %d, %v", n, err)
	}
}

// approvalFlow is a -> approve -> b, where approve waits for a human.
func approvalFlow(c *counts) *workflow.Workflow[doc] {
	return workflow.New[doc]("approval", nil).
		Node("a", mark("a", c)).
		Node("approve", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			var answer string
			ok, err := workflow.ResumeInput(ctx, &answer)
			if err != nil {
				return s, err
			}
			c.add("approve?")
			if !ok {
				return s, workflow.Interrupt("approve " + s.Text + "?")
			}
			c.add("approve")
			s.Text += " (" + answer + ")"
			return s, nil
		})).
		Node("b", mark("b", c)).
		Edge(workflow.Start, "a").
		Edge("a", "approve").
		Edge("approve", "b").
		Edge("b", workflow.End).
		MustBuild()
}

func TestInterruptSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := memory.New(nil)
	client1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(client1, st1, nil)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt1)
	_, err = w.Run(t.Context(), rt1, doc{Text: "the plan"}, &workflow.RunOptions{RunID: "r"})
	var ie *workflow.InterruptError
	if !errors.As(err, &ie) || !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatalf("err = %v, want an interrupt", err)
	}
	if ie.RunID != "r" || ie.Info.Node != "approve" || ie.Reason != "approve the plan?" {
		t.Errorf("interrupt %+v %+v", ie, ie.Info)
	}
	stored, err := w.LoadRun(t.Context(), rt1, "r")
	if err != nil || stored.Status != workflow.RunInterrupted {
		t.Fatalf("stored run: %+v, %v", stored, err)
	}
	if _, err := w.Wait(t.Context(), rt1, "r"); !errors.As(err, &ie) || ie.Info.Node != "approve" {
		t.Errorf("Wait on an interrupted run = %v", err)
	}
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
		t.Errorf("Recover = %d, %v: an interrupted run waits for its input, not a step", n, err)
	}
	if err := w.Answer(t.Context(), rt2, "r", "yes"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt2, "r")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "the plan (yes)", Trail: []string{"a", "b"}, N: 2}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "approve?": 2, "approve": 1, "b": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if err := w.Answer(t.Context(), rt2, "r", "again"); err == nil || !strings.Contains(err.Error(), "not interrupted") {
		t.Errorf("resuming a complete run: %v", err)
	}
}

func TestFork(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := linear(t, &c, "a", "b", "c")
	serve(t, w, rt)
	orig, err := w.Run(t.Context(), rt, doc{Text: "orig"}, &workflow.RunOptions{RunID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := w.Checkpoints(t.Context(), rt, "o")
	if err != nil {
		t.Fatal(err)
	}
	// Fork after node a, with a changed text.
	changed := before[1].State
	changed.Text = "forked"
	id, err := w.Fork(t.Context(), rt, "o", 1, &changed, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(t.Context(), rt, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "forked", Trail: []string{"a", "b", "c"}, N: 3}, got); diff != "" {
		t.Errorf("fork's state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 2, "c": 2}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	after, err := w.Checkpoints(t.Context(), rt, "o")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the original run's checkpoints changed:\n%s", diff)
	}
	if orig.Text != "orig" {
		t.Errorf("original state %+v", orig)
	}
	fcps, err := w.Checkpoints(t.Context(), rt, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(fcps) != 3 || fcps[0].State.Text != "forked" || fcps[0].Next.Node != "b" || fcps[2].Next.Node != workflow.End {
		t.Errorf("fork's checkpoints %+v", fcps)
	}
	// Forking from a checkpoint that does not exist fails at once.
	if _, err := w.Fork(t.Context(), rt, "o", 9, nil, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fork from a missing checkpoint: %v", err)
	}
}

// TestDuplicateDelivery runs a workflow with a loop, a parallel step and
// an agent node on a broker that publishes every event twice and delivers
// every copy twice: the result is that of a clean run, and every node runs
// once per visit.
func TestDuplicateDelivery(t *testing.T) {
	build := func(t *testing.T, b calf.Broker) (map[string]int, doc, int) {
		t.Helper()
		rt := runtimeOn(t, b, storemem.New())
		m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("summary of " + req.Messages[len(req.Messages)-1].Text()), nil
		})
		var calls counts
		counted := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
			calls.add("model")
			return m(ctx, req)
		})
		summarizer := agent.Must(agent.New("summarizer", counted, nil))
		if err := summarizer.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		var c counts
		w := workflow.New[doc]("dup", nil).
			Node("write", mark("write", &c)).
			Node("x", mark("x", &c)).
			Node("y", mark("y", &c)).
			Node("join", mark("join", &c)).
			Node("sum", workflow.AgentNode(summarizer,
				func(s doc) (string, error) { return strings.Join(s.Trail, " "), nil },
				func(s doc, out string) (doc, error) { c.add("sum"); s.Text = out; return s, nil })).
			Edge(workflow.Start, "write").
			Parallel("write", []string{"x", "y"}, "join", func(base doc, bs []doc) (doc, error) {
				for _, b := range bs {
					base.Trail = append(base.Trail, b.Trail[len(b.Trail)-1])
				}
				return base, nil
			}).
			Route("join", func(s doc) string {
				if len(s.Trail) < 8 {
					return "write"
				}
				return "sum"
			}, "write", "sum").
			Edge("sum", workflow.End).
			MustBuild()
		serve(t, w, rt)
		got, err := w.Run(t.Context(), rt, doc{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.get(), got, calls.get()["model"]
	}
	clean := memory.New(nil)
	t.Cleanup(func() { _ = clean.Close() })
	wantRuns, want, wantCalls := build(t, clean)
	if diff := cmp.Diff(map[string]int{"write": 2, "x": 2, "y": 2, "join": 2, "sum": 1}, wantRuns); diff != "" {
		t.Fatalf("clean run (-want +got):\n%s", diff)
	}
	inner := memory.New(nil)
	t.Cleanup(func() { _ = inner.Close() })
	dup := brokertest.DuplicateDeliveries(brokertest.DuplicatePublishes(inner, 2), 2)
	runs, got, calls := build(t, dup)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state (-clean +duplicated):\n%s", diff)
	}
	if diff := cmp.Diff(wantRuns, runs); diff != "" {
		t.Errorf("node runs (-clean +duplicated):\n%s", diff)
	}
	if calls != wantCalls {
		t.Errorf("model calls: %d, clean run %d", calls, wantCalls)
	}
}

func TestRunStream(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := linear(t, &c, "a", "b")
	serve(t, w, rt)
	var got []string
	for ev, err := range w.RunStream(t.Context(), rt, doc{}, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %s", ev.Kind, ev.Step, ev.Node))
		if ev.Kind == workflow.EventOutput && ev.Output.Status != workflow.OutputComplete {
			t.Errorf("output %+v", ev.Output)
		}
	}
	want := []string{"input 0 ", "step 1 a", "node_done 1 a", "step 2 b", "node_done 2 b", "output 0 "}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%q\nwant\n%q", got, want)
	}
}

func TestBuildErrors(t *testing.T) {
	f := workflow.Func(func(_ context.Context, s doc) (doc, error) { return s, nil })
	for _, tc := range []struct {
		name  string
		build func() *workflow.Builder[doc]
		want  []string
	}{
		{"no entry", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Edge("a", workflow.End)
		}, []string{"no entry node"}},
		{"unknown nodes", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Edge(workflow.Start, "a").Edge("a", "b").Edge("c", workflow.End)
		}, []string{`edge from "a": unknown node "b"`, `edge from unknown node "c"`}},
		{"unreachable", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Node("b", f).Edge(workflow.Start, "a").Edge("a", workflow.End).Edge("b", workflow.End)
		}, []string{`node "b" cannot be reached from the entry "a"`}},
		{"no way out", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Edge(workflow.Start, "a")
		}, []string{`node "a" has no way out`}},
		{"two edges", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Node("b", f).Edge(workflow.Start, "a").Edge("a", "b").Edge("a", workflow.End).Edge("b", workflow.End)
		}, []string{`node "a" has 2 edges`}},
		{"bad names", func() *workflow.Builder[doc] {
			return workflow.New[doc]("bad name", nil).Node("end", f).Node("a", f).Node("a", f).Edge(workflow.Start, "a").Edge("a", workflow.End)
		}, []string{`name "bad name"`, `node name "end" is reserved`, `node "a" is added twice`}},
		{"route target", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Edge(workflow.Start, "a").Route("a", func(doc) string { return "zz" }, "zz")
		}, []string{`route from "a": unknown node "zz"`}},
		{"parallel", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Node("x", f).Edge(workflow.Start, "a").Edge("x", workflow.End).
				Parallel("a", []string{"x", "q"}, "j", func(b doc, _ []doc) (doc, error) { return b, nil })
		}, []string{`unknown join node "j"`, `unknown branch node "q"`, `branch node "x" has edges of its own`}},
		{"branch as a target", func() *workflow.Builder[doc] {
			merge := func(b doc, _ []doc) (doc, error) { return b, nil }
			return workflow.New[doc]("w", nil).Node("a", f).Node("x", f).Node("j", f).
				Edge(workflow.Start, "a").Parallel("a", []string{"x"}, "j", merge).
				Route("j", func(doc) string { return "x" }, "x", workflow.End)
		}, []string{`route from "j" to "x", a branch of the parallel step after "a"`}},
		{"max visits", func() *workflow.Builder[doc] {
			return workflow.New[doc]("w", nil).Node("a", f).Edge(workflow.Start, "a").Edge("a", workflow.End).MaxVisits("b", 0)
		}, []string{`max visits of node "b" must be at least 1`, `max visits of unknown node "b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.build().Build()
			if !errors.Is(err, workflow.ErrInvalidWorkflow) {
				t.Fatalf("err = %v, want ErrInvalidWorkflow", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q\nwant it to say %q", err, w)
				}
			}
		})
	}
}

func TestUndecodableInputState(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := linear(t, &c, "a")
	serve(t, w, rt)
	f, err := rt.Client().Follow(t.Context(), workflow.OutputChannel("linear"), "bad")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := rt.Client().Emit(t.Context(), workflow.InputChannel("linear"), workflow.InputEvent{State: []byte(`{"n":"x"}`)},
		calf.WithID("bad.input"), calf.WithMetadata(calf.Metadata{RunID: "bad", CorrelationID: "bad"})); err != nil {
		t.Fatal(err)
	}
	m, err := f.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out workflow.OutputEvent
	if err := m.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != workflow.OutputFailed || !strings.Contains(out.Error, "does not decode") {
		t.Errorf("output %+v", out)
	}
	if len(c.get()) != 0 {
		t.Errorf("nodes ran: %v", c.get())
	}
}

// Agent nodes as parallel branches: each branch's agent run replies to the
// workflow, and the join runs once both replies are in.
func TestParallelAgentBranches(t *testing.T) {
	rt := newRuntime(t)
	echo := func(prefix string) modeltest.FunctionModel {
		return func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text(prefix + req.Messages[len(req.Messages)-1].Text()), nil
		}
	}
	fr := agent.Must(agent.New("fr", echo("fr:"), nil))
	de := agent.Must(agent.New("de", echo("de:"), nil))
	for _, a := range []*agent.Agent[string]{fr, de} {
		if err := a.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	translate := func(a *agent.Agent[string]) workflow.Node[doc] {
		return workflow.AgentNode(a,
			func(s doc) (string, error) { return s.Text, nil },
			func(s doc, out string) (doc, error) { s.Trail = []string{out}; return s, nil })
	}
	var c counts
	w := workflow.New[doc]("multi", nil).
		Node("start-here", mark("start-here", &c)).
		Node("fr", translate(fr)).
		Node("de", translate(de)).
		Node("join", mark("join", &c)).
		Edge(workflow.Start, "start-here").
		Parallel("start-here", []string{"fr", "de"}, "join", func(base doc, bs []doc) (doc, error) {
			for _, b := range bs {
				base.Trail = append(base.Trail, b.Trail...)
			}
			return base, nil
		}).
		Edge("join", workflow.End).
		MustBuild()
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{Text: "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start-here", "fr:hello", "de:hello", "join"}; !slices.Equal(got.Trail, want) {
		t.Errorf("trail %q, want %q", got.Trail, want)
	}
}

func TestInterruptInBranchFails(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := workflow.New[doc]("pi", nil).
		Node("a", mark("a", &c)).
		Node("x", workflow.Func(func(_ context.Context, s doc) (doc, error) { return s, workflow.Interrupt("wait") })).
		Node("j", mark("j", &c)).
		Edge(workflow.Start, "a").
		Parallel("a", []string{"x"}, "j", func(base doc, _ []doc) (doc, error) { return base, nil }).
		Edge("j", workflow.End).
		MustBuild()
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "a branch of a parallel step cannot interrupt") {
		t.Fatalf("err = %v", err)
	}
}

// failingPublish fails the first publish of each message id that fail
// selects, as a broker that is briefly unreachable would.
type failingPublish struct {
	calf.Broker
	mu     sync.Mutex
	fail   func(*calf.Message) bool
	failed map[string]bool
}

func (f *failingPublish) Publish(ctx context.Context, msg *calf.Message) error {
	f.mu.Lock()
	bad := f.fail(msg) && !f.failed[msg.ID]
	if bad {
		f.failed[msg.ID] = true
	}
	f.mu.Unlock()
	if bad {
		return errors.New("broker unreachable")
	}
	return f.Broker.Publish(ctx, msg)
}

// A worker saves a node's completion and then fails to emit the next
// step: the redelivered step finds the completion recorded, does not run
// the node again, and emits what followed from it.
func TestEmitFailsAfterCommit(t *testing.T) {
	inner := memory.New(&memory.Options{Backoff: func(int) time.Duration { return 0 }})
	t.Cleanup(func() { _ = inner.Close() })
	b := &failingPublish{Broker: inner, failed: map[string]bool{}, fail: func(m *calf.Message) bool {
		return strings.HasSuffix(m.ID, ".step.3.c") || strings.HasSuffix(m.ID, ".node_done.1")
	}}
	rt := runtimeOn(t, b, storemem.New())
	var c counts
	w := linear(t, &c, "a", "b", "c")
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, doc{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Trail, []string{"a", "b", "c"}) {
		t.Errorf("trail %q", got.Trail)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if len(b.failed) != 2 {
		t.Errorf("failed publishes: %v", b.failed)
	}
}

// A workflow as a node of another: the child run reports its end to the
// parent's reply channel, and a duplicate start of an ended run answers
// again.
func TestSubWorkflow(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	inner := linear(t, &c, "x", "y")
	serve(t, inner, rt)
	type outer struct {
		Topic string   `json:"topic"`
		Inner []string `json:"inner"`
	}
	w := workflow.New[outer]("outer", nil).
		Node("sub", workflow.SubWorkflow(inner,
			func(s outer) (doc, error) { return doc{Text: s.Topic}, nil },
			func(s outer, d doc) (outer, error) { s.Inner = append(d.Trail, d.Text); return s, nil })).
		Edge(workflow.Start, "sub").
		Edge("sub", workflow.End).
		MustBuild()
	serve(t, w, rt)
	got, err := w.Run(t.Context(), rt, outer{Topic: "t"}, &workflow.RunOptions{RunID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"x", "y", "t"}; !slices.Equal(got.Inner, want) {
		t.Errorf("inner %q, want %q", got.Inner, want)
	}
	child, err := inner.LoadRun(t.Context(), rt, "o.1.sub")
	if err != nil {
		t.Fatal(err)
	}
	if child.Parent != "o" || child.Status != workflow.RunComplete {
		t.Errorf("child: parent %q status %s", child.Parent, child.Status)
	}
	// Starting the ended child again answers with its output again, and
	// runs nothing.
	f, err := rt.Client().Follow(t.Context(), workflow.OutputChannel(inner.Name()), "o.1.sub")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := inner.Submit(t.Context(), rt, doc{Text: "other"}, &workflow.RunOptions{RunID: "o.1.sub"}); err != nil {
		t.Fatal(err)
	}
	m, err := f.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out workflow.OutputEvent
	if err := m.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if again, err := inner.DecodeOutput(&out); err != nil || again.Text != "t" {
		t.Errorf("again = %+v, %v", again, err)
	}
	if again, err := inner.Run(t.Context(), rt, doc{Text: "other"}, &workflow.RunOptions{RunID: "o.1.sub"}); err != nil || again.Text != "t" {
		t.Errorf("Run again = %+v, %v", again, err)
	}
	if diff := cmp.Diff(map[string]int{"x": 1, "y": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

// The worker dies while an agent node's child run calls the model; a new
// worker on the same database recovers the workflow, whose step submits
// the child again: the agent continues its recorded run, and the workflow
// completes without running its finished nodes again.
func TestCrashDuringAgentNode(t *testing.T) {
	var crash atomic.Bool
	var modelCalls atomic.Int32
	started := make(chan struct{}, 1)
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		modelCalls.Add(1)
		if crash.Load() {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return modeltest.Text("draft of " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	var c counts
	build := func(t *testing.T, rt *agent.Runtime) *workflow.Workflow[doc] {
		drafter := agent.Must(agent.New("drafter", m, nil))
		if err := drafter.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		w := workflow.New[doc]("drafting", nil).
			Node("a", mark("a", &c)).
			Node("draft", workflow.AgentNode(drafter,
				func(s doc) (string, error) { return s.Text, nil },
				func(s doc, out string) (doc, error) { s.Text = out; return s, nil })).
			Node("b", mark("b", &c)).
			Edge(workflow.Start, "a").Edge("a", "draft").Edge("draft", "b").Edge("b", workflow.End).
			MustBuild()
		serve(t, w, rt)
		return w
	}

	path := filepath.Join(t.TempDir(), "calf.db")
	st1, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := memory.New(nil)
	client1 := calf.NewClient(b1, nil)
	crash.Store(true)
	rt1 := agent.NewRuntime(client1, st1, nil)
	w1 := build(t, rt1)
	id, err := w1.Submit(t.Context(), rt1, doc{Text: "the topic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	_ = client1.Close()
	_ = b1.Close()
	_ = st1.Close()

	crash.Store(false)
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	rt2 := runtimeOn(t, b2, st2)
	w2 := build(t, rt2)
	if n, err := w2.Recover(t.Context(), rt2, nil); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	got, err := w2.Wait(t.Context(), rt2, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{Text: "draft of the topic", Trail: []string{"a", "b"}, N: 2}, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	if n := modelCalls.Load(); n != 2 {
		t.Errorf("model calls = %d, want 2 (the one cut short, and its retry)", n)
	}
}

// Two workers on one broker and one store share the runs of a workflow
// through the broker's consumer groups; every node of every run runs once.
func TestTwoWorkers(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	s := storemem.New()
	var c counts
	var w *workflow.Workflow[doc]
	for range 2 {
		rt := runtimeOn(t, b, s)
		w = parallel(t, &c, nil)
		serve(t, w, rt)
	}
	caller := runtimeOn(t, b, s)
	const runs = 20
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Go(func() {
			got, err := w.Run(t.Context(), caller, doc{N: 100 * i}, nil)
			if err == nil && (got.N != 100*i+2 || len(got.Trail) != 5) {
				err = fmt.Errorf("run %d: state %+v", i, got)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	want := map[string]int{"split": runs, "x": runs, "y": runs, "z": runs, "join": runs}
	if diff := cmp.Diff(want, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
}

func BenchmarkLinearRun(b *testing.B) {
	br := memory.New(nil)
	defer br.Close()
	client := calf.NewClient(br, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)
	var c counts
	w := workflow.New[doc]("bench", nil).
		Node("a", mark("a", &c)).Node("b", mark("b", &c)).Node("c", mark("c", &c)).
		Edge(workflow.Start, "a").Edge("a", "b").Edge("b", "c").Edge("c", workflow.End).
		MustBuild()
	if err := w.Serve(b.Context(), rt, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Run(b.Context(), rt, doc{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCancel(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	s := storemem.New()
	rt := runtimeOn(t, b, s)
	var c counts
	started, release := make(chan struct{}), make(chan struct{})
	w := workflow.New[doc]("cancel", nil).
		Node("slow", workflow.Func(func(_ context.Context, s doc) (doc, error) {
			close(started)
			<-release
			c.add("slow")
			return s, nil
		})).
		Node("after", mark("after", &c)).
		Edge(workflow.Start, "slow").Edge("slow", "after").Edge("after", workflow.End).
		MustBuild()
	serve(t, w, rt)
	done := make(chan error, 1)
	go func() {
		_, err := w.Run(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "c"})
		done <- err
	}()
	<-started
	if err := w.Cancel(t.Context(), rt, "c", "changed my mind"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, agent.ErrRunCancelled) || errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "changed my mind") {
		t.Fatalf("err = %v", err)
	}
	close(release)
	if _, err := w.Wait(t.Context(), rt, "c"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("Wait = %v", err)
	}
	// Stop the worker (waiting for the slow node's handler to return):
	// its late result was dropped and the next node never ran.
	if err := rt.Client().Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"slow": 1}, c.get()); diff != "" {
		t.Errorf("node runs (-want +got):\n%s", diff)
	}
	rt = runtimeOn(t, b, s)
	if err := w.Cancel(t.Context(), rt, "c", "again"); err != nil {
		t.Errorf("cancelling a cancelled run: %v", err)
	}
	if err := w.Answer(t.Context(), rt, "c", nil); err == nil {
		t.Error("resumed a cancelled run")
	}
	// A run not recorded yet is recorded cancelled: its input, if it
	// comes, starts nothing.
	if err := w.Cancel(t.Context(), rt, "nope", "x"); err != nil {
		t.Errorf("cancel a run not started: %v", err)
	}
	if info, err := w.LoadRun(t.Context(), rt, "nope"); err != nil || info.Status != workflow.RunCancelled || info.Error != "x" {
		t.Errorf("run cancelled before it started: %+v, %v", info, err)
	}
}

func TestCancelInterrupted(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt)
	if _, err := w.Run(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}
	if err := w.Cancel(t.Context(), rt, "r", "nobody answered"); err != nil {
		t.Fatal(err)
	}
	st, err := w.LoadRun(t.Context(), rt, "r")
	if err != nil || st.Status != workflow.RunCancelled || st.Error != "nobody answered" {
		t.Fatalf("stored run %+v, %v", st, err)
	}
	if _, err := w.Wait(t.Context(), rt, "r"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("Wait = %v", err)
	}
}

func TestNodePanic(t *testing.T) {
	rt := newRuntime(t)
	w := workflow.New[doc]("panicky", nil).
		Node("a", workflow.Func(func(context.Context, doc) (doc, error) { panic("boom") })).
		Edge(workflow.Start, "a").Edge("a", workflow.End).
		MustBuild()
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, nil)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Kind != "workflow" || re.Reason != `node "a": panic: boom` {
		t.Fatalf("err = %v", err)
	}
}

func TestRunStreamEnds(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	fails := workflow.New[doc]("fails", nil).
		Node("a", workflow.Func(func(context.Context, doc) (doc, error) { return doc{}, errors.New("bad") })).
		Edge(workflow.Start, "a").Edge("a", workflow.End).
		MustBuild()
	serve(t, fails, rt)
	var kinds []workflow.EventKind
	var last error
	for ev, err := range fails.RunStream(t.Context(), rt, doc{}, nil) {
		if err != nil {
			last = err
			break
		}
		kinds = append(kinds, ev.Kind)
	}
	if !errors.Is(last, agent.ErrRunFailed) || !slices.Equal(kinds, []workflow.EventKind{"input", "step", "output"}) {
		t.Errorf("failing run: events %q, error %v", kinds, last)
	}

	w := approvalFlow(&c)
	serve(t, w, rt)
	var got []string
	for ev, err := range w.RunStream(t.Context(), rt, doc{}, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Kind))
		if ev.Kind == workflow.EventOutput {
			got = append(got, ev.Output.Status)
			if ev.Output.Interrupt != nil {
				got = append(got, ev.Output.Interrupt.Node)
			}
		}
	}
	if want := []string{"input", "step", "node_done", "step", "output", "interrupted", "approve"}; !slices.Equal(got, want) {
		t.Errorf("interrupted run: %q, want %q", got, want)
	}
}

// Resume records the input before it publishes the resume event, so a
// resume whose event is lost (the broker went down) is continued by
// Recover on a new worker.
func TestResumeEventLost(t *testing.T) {
	s := storemem.New()
	b1 := memory.New(nil)
	rt1 := runtimeOn(t, b1, s)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt1)
	if _, err := w.Run(t.Context(), rt1, doc{Text: "p"}, &workflow.RunOptions{RunID: "r"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}
	_ = rt1.Client().Close()
	_ = b1.Close()
	if err := w.Answer(t.Context(), rt1, "r", "ok"); !errors.Is(err, calf.ErrClosed) {
		t.Fatalf("Resume on a closed broker = %v", err)
	}
	if err := w.Answer(t.Context(), rt1, "r", "twice"); err == nil || !strings.Contains(err.Error(), "running, not interrupted") {
		t.Errorf("second Resume = %v", err)
	}
	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	rt2 := runtimeOn(t, b2, s)
	serve(t, w, rt2)
	if n, err := w.Recover(t.Context(), rt2, nil); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	got, err := w.Wait(t.Context(), rt2, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "p (ok)" {
		t.Errorf("state %+v", got)
	}
}

func TestNodeTimeout(t *testing.T) {
	rt := newRuntime(t)
	w := workflow.New[doc]("hung", &workflow.Options{NodeTimeout: time.Millisecond}).
		Node("a", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			<-ctx.Done()
			return s, ctx.Err()
		})).
		Edge(workflow.Start, "a").Edge("a", workflow.End).
		MustBuild()
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, nil)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Kind != "workflow" || re.Reason != `node "a" timed out after 1ms (Options.NodeTimeout)` {
		t.Fatalf("err = %v", err)
	}
}

// An agent node's run held up by a parked message holds up the workflow
// run: Run and RunStream report it at once, and the run goes on waiting
// for the replay.
func TestAgentNodeParkedMessage(t *testing.T) {
	b := memory.New(&memory.Options{MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Millisecond }})
	t.Cleanup(func() { _ = b.Close() })
	st := storemem.New()
	rt := runtimeOn(t, b, st)
	faulty := storetest.WithFaults(st, storetest.Faults{Kinds: []string{store.KindRun}, WriteFailRate: 1})
	writer := agent.Must(agent.New("writer", modeltest.NewTestModel(modeltest.Text("never")), nil))
	if err := writer.Serve(t.Context(), agent.NewRuntime(rt.Client(), faulty, nil), nil); err != nil {
		t.Fatal(err)
	}
	w := poet(writer)
	serve(t, w, rt)
	if err := deadletter.Serve(t.Context(), rt.Client(), st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	check := func(how string, err error) {
		t.Helper()
		var re *agent.RunError
		if !errors.Is(err, agent.ErrRunParked) || !errors.As(err, &re) || re.Parked.Group != agent.InputChannel("writer") {
			t.Fatalf("%s: err = %v, want an *agent.RunError matching ErrRunParked for the writer's input", how, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: heard of it only at the deadline", how)
		}
	}
	_, err := w.Run(ctx, rt, doc{}, &workflow.RunOptions{RunID: "w1"})
	check("Run", err)
	var last error
	for _, e := range w.RunStream(ctx, rt, doc{}, &workflow.RunOptions{RunID: "w2"}) {
		if e != nil {
			last = e
		}
	}
	check("RunStream", last)
	if s, err := w.LoadRun(t.Context(), rt, "w1"); err != nil || s.Status.Terminal() {
		t.Errorf("run w1 after the caller's error: %+v, %v; want it still running", s, err)
	}
	// Wait, called after the message was parked, finds the recorded dead
	// letter instead of waiting for an output that will not come.
	for {
		recs, err := deadletter.OfRun(ctx, st, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Second)
	defer waitCancel()
	_, err = w.Wait(waitCtx, rt, "w1")
	check("Wait", err)
	if waitCtx.Err() != nil {
		t.Fatal("Wait: heard of it only at its deadline")
	}
}

// Cancelling a workflow run cancels the agent run of its node in
// progress: the agent takes no step after its model call.
func TestCancelCancelsChildRun(t *testing.T) {
	rt := newRuntime(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var calls atomic.Int64
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return modeltest.Text("too late"), nil
	})
	writer := agent.Must(agent.New("writer", m, nil))
	if err := writer.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	w := poet(writer)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "w1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := w.Cancel(t.Context(), rt, "w1", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := w.Wait(ctx, rt, "w1"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("Wait = %v, want ErrCancelled", err)
	}
	var st *agent.RunInfo
	for {
		var err error
		if st, err = rt.LoadAgentRun(ctx, "w1.1.write"); err != nil {
			t.Fatal(err)
		}
		if st.Status.Terminal() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the agent run is still %s after the workflow run was cancelled", st.Status)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if st.Status != agent.RunCancelled || !strings.Contains(st.Error, "workflow poet: run w1 was cancelled: no longer needed") {
		t.Errorf("agent run: status %s, error %q; want cancelled by the workflow", st.Status, st.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("model calls = %d, want 1", n)
	}
}

// gatedStore holds the write that creates a run of the workflow named in
// until release is closed, announcing it on reached.
type gatedStore struct {
	store.Store
	in      string
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if kind == store.KindWorkflow && version == 0 && bytes.Contains(data, []byte(`"workflow":"`+g.in+`"`)) {
		g.once.Do(func() { close(g.reached) })
		<-g.release
	}
	return g.Store.Put(ctx, kind, id, data, version)
}

// TestCancelBeforeSubWorkflowStarts: a parent cancelled while the input of
// its sub-workflow run is on its way records the child cancelled, and the
// child, when its input arrives, runs none of its nodes.
func TestCancelBeforeSubWorkflowStarts(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	s := storemem.New()
	var c counts
	inner := workflow.New[doc]("inner", nil).
		Node("x", mark("x", &c)).
		Edge(workflow.Start, "x").Edge("x", workflow.End).
		MustBuild()
	gate := &gatedStore{Store: s, in: "inner", reached: make(chan struct{}), release: make(chan struct{})}
	// The child is served on a runtime whose store holds the write that
	// would create the child's run, as if its input were still on its way.
	serve(t, inner, runtimeOn(t, b, gate))
	rt := runtimeOn(t, b, s)
	outer := workflow.New[doc]("outer", nil).
		Node("sub", workflow.SubWorkflow(inner,
			func(s doc) (doc, error) { return s, nil },
			func(_ doc, d doc) (doc, error) { return d, nil })).
		Edge(workflow.Start, "sub").Edge("sub", workflow.End).
		MustBuild()
	serve(t, outer, rt)
	if _, err := outer.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "p"}); err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	if err := outer.Cancel(t.Context(), rt, "p", "stop"); err != nil {
		t.Fatal(err)
	}
	f, err := rt.Client().Follow(t.Context(), workflow.OutputChannel("inner"), "p.1.sub")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	close(gate.release)
	m, err := f.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out workflow.OutputEvent
	if err := m.Decode(&out); err != nil || out.Status != workflow.OutputCancelled {
		t.Fatalf("child output %+v (%v), want cancelled", out, err)
	}
	child, err := inner.LoadRun(t.Context(), rt, "p.1.sub")
	if err != nil {
		t.Fatal(err)
	}
	if child.Status != workflow.RunCancelled || !strings.Contains(child.Error, "workflow outer: run p was cancelled: stop") {
		t.Errorf("child: status %s, error %q; want cancelled by its parent", child.Status, child.Error)
	}
	if _, err := outer.Wait(t.Context(), rt, "p"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("parent Wait = %v, want ErrCancelled", err)
	}
	// The child's handlers are done with its input once its output is out;
	// close the clients to be sure, then check that x never ran.
	if err := rt.Client().Close(); err != nil {
		t.Fatal(err)
	}
	if got := c.get(); len(got) != 0 {
		t.Errorf("the cancelled child ran %v", got)
	}
}

// The step message of an interrupted node, delivered again after the run
// was resumed (as when the worker that interrupted it was killed before
// its acknowledgement reached the broker), does not run the node a second
// time beside the resume event's run of it.
func TestStepRedeliveredAfterResume(t *testing.T) {
	returned := make(chan struct{})
	b := brokertest.Handled(memory.New(nil), func(m *calf.Message, _ error) {
		if m.ID == "step-again" {
			close(returned)
		}
	})
	t.Cleanup(func() { _ = b.Close() })
	rt := runtimeOn(t, b, storemem.New())
	var runs atomic.Int64
	started, gate := make(chan struct{}, 2), make(chan struct{})
	w := workflow.New[doc]("again", nil).
		Node("approve", workflow.Func(func(ctx context.Context, s doc) (doc, error) {
			var answer string
			ok, err := workflow.ResumeInput(ctx, &answer)
			if err != nil {
				return s, err
			}
			if !ok {
				return s, workflow.Interrupt("approve?")
			}
			runs.Add(1)
			started <- struct{}{}
			<-gate
			s.Text = answer
			return s, nil
		})).
		Edge(workflow.Start, "approve").
		Edge("approve", workflow.End).
		MustBuild()
	serve(t, w, rt)
	_, err := w.Run(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "r"})
	var ie *workflow.InterruptError
	if !errors.As(err, &ie) {
		t.Fatalf("Run = %v, want an interrupt", err)
	}
	if err := w.Answer(t.Context(), rt, "r", "yes"); err != nil {
		t.Fatal(err)
	}
	<-started // the resume event runs the node
	if _, err := rt.Client().Emit(t.Context(), workflow.StepChannel("again"), workflow.StepEvent{Step: ie.Info.Step, Node: "approve"},
		calf.WithID("step-again"), calf.WithKey("r"), calf.WithMetadata(calf.Metadata{CorrelationID: "r", RunID: "r"})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned: // handled while the node runs
	case <-started:
		t.Error("the step message ran the resumed node a second time")
	case <-time.After(10 * time.Second):
		t.Fatal("the step message was not handled")
	}
	close(gate)
	got, err := w.Wait(t.Context(), rt, "r")
	if err != nil || got.Text != "yes" {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the resumed node ran %d times, want 1", n)
	}
}

// TestCancelEndsChildApprovals: the approval request of an agent node's
// run ends with the cancelled workflow run: it is not listed pending under
// the workflow run, is stored cancelled, and answering it is refused with
// approval.ErrRunEnded.
func TestCancelEndsChildApprovals(t *testing.T) {
	rt := newRuntime(t)
	var runs atomic.Int64
	deploy := tool.Must(tool.New("deploy", "Deploy.", func(context.Context, struct{}) (string, error) {
		runs.Add(1)
		return "deployed", nil
	}))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text(last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{}`)), nil
	})
	writer := agent.Must(agent.New("writer", m, &agent.Options{
		Tools: []tool.Tool{deploy}, Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits},
	}))
	if err := writer.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	w := poet(writer)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "w1"}); err != nil {
		t.Fatal(err)
	}
	var reqs []approval.Approval
	for deadline := time.Now().Add(10 * time.Second); len(reqs) == 0; time.Sleep(5 * time.Millisecond) {
		var err error
		if reqs, err = approval.List(t.Context(), rt.Store(), "w1", approval.Pending); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no request under the workflow run")
		}
	}
	if err := w.Cancel(t.Context(), rt, "w1", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if p, err := approval.List(t.Context(), rt.Store(), "w1", approval.Pending); err != nil || len(p) != 0 {
		t.Errorf("pending requests of the cancelled workflow run: %+v, %v", p, err)
	}
	if a, err := approval.Get(t.Context(), rt.Store(), reqs[0].ID); err != nil || a.Status != approval.Cancelled || !strings.Contains(a.Message, "no longer needed") {
		t.Errorf("stored request: %+v, %v", a, err)
	}
	if _, err := approval.Respond(t.Context(), rt.Store(), rt.Client(), reqs[0].ID, approval.Answer{Approve: true, Digest: reqs[0].Digest}); !errors.Is(err, approval.ErrRunEnded) {
		t.Errorf("answer: %v, want ErrRunEnded", err)
	}
	if _, err := w.Wait(t.Context(), rt, "w1"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("Wait = %v, want ErrCancelled", err)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}

// A run cancelled from a process without the workflow's definition (calf
// runs cancel): the cancel request it publishes is handled by a worker
// that serves the workflow, which cancels the agent node's run in
// progress too.
func TestCancelRunWithoutDefinition(t *testing.T) {
	rt := newRuntime(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		started <- struct{}{}
		<-release
		return modeltest.Text("too late"), nil
	})
	writer := agent.Must(agent.New("writer", m, nil))
	if err := writer.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	w := poet(writer)
	serve(t, w, rt)
	if _, err := w.Submit(t.Context(), rt, doc{}, &workflow.RunOptions{RunID: "w1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	nodef := agent.NewRuntime(calf.NewClient(rt.Client().Broker(), nil), rt.Store(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	info, err := cancelWorkflowRun(ctx, nodef, "poet", "w1", "no longer needed")
	if err != nil || info.ID != "w1" {
		t.Fatalf("CancelRun = %+v, %v", info, err)
	}
	if _, err := w.Wait(ctx, rt, "w1"); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("Wait = %v, want ErrRunCancelled", err)
	}
	close(release)
	for {
		st, err := rt.LoadAgentRun(ctx, "w1.1.write")
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Terminal() {
			if st.Status != agent.RunCancelled || !strings.Contains(st.Error, "workflow poet: run w1 was cancelled: no longer needed") {
				t.Errorf("agent run: status %s, error %q; want cancelled by the workflow", st.Status, st.Error)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the agent run is still %s after the workflow run was cancelled", st.Status)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if info, err := cancelWorkflowRun(ctx, nodef, "poet", "w1", "again"); err != nil || info.Status != workflow.RunCancelled {
		t.Errorf("CancelRun of a cancelled run = %+v, %v", info, err)
	}
	if info, err := cancelWorkflowRun(ctx, nodef, "poet", "nope", "not wanted"); err != nil || info.Status != workflow.RunCancelled {
		t.Errorf("cancel by name of a run not started = %+v, %v; want it recorded cancelled", info, err)
	}
}
