package runkinds_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// gate is the model of the child agent every subject's run waits on: each
// call is counted and, while the gate is shut, waits until it opens (or
// its context ends); with fail set, a call fails.
type gate struct {
	calls   atomic.Int64
	entered chan struct{} // receives once per call that waits
	mu      sync.Mutex
	open    chan struct{}
	fail    bool
}

func newGate(shut bool) *gate {
	g := &gate{entered: make(chan struct{}, 16), open: make(chan struct{})}
	if !shut {
		close(g.open)
	}
	return g
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) model() model.Model {
	return modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		g.calls.Add(1)
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		default:
			g.entered <- struct{}{}
			select {
			case <-open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if g.fail {
			return nil, calf.Permanent(errors.New("the child's model refuses"))
		}
		return modeltest.Text("child done"), nil
	})
}

// subject is one kind of run, built on a runtime around a child agent
// whose model is the gate: its run starts a child run of that agent (of
// a workflow's agent node, for the team's workflow member) and completes
// once the child answers.
type subject struct {
	name string
	// kind is the RunRef kind of the subject's runs, runner its name.
	kind, runner string
	// build serves the subject on rt and returns how to submit a run and
	// wait for its end.
	build func(t *testing.T, rt *agent.Runtime, child *agent.Agent[string]) *ops
}

// ops are a subject's calls on one runtime: submit a run, wait for its
// end, and recover the runs of the subject and its children (after the
// process that carried them died).
type ops struct {
	submit, wait func(ctx context.Context, id string) error
	submitPrompt func(ctx context.Context, id, prompt string) error
	// submitDeadline starts a run with a deadline.
	submitDeadline func(ctx context.Context, id string, at time.Time) error
	recover        func(ctx context.Context) error
}

// recoverAll recovers the runs of each recoverer in turn.
func recoverAll(rs ...func(ctx context.Context) (int, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, r := range rs {
			if _, err := r(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

var subjects = []subject{
	{name: "agent", kind: "agent", runner: "lead", build: buildAgent},
	{name: "team", kind: "team", runner: "crew", build: buildTeam},
	{name: "team-of-workflow", kind: "team", runner: "crew", build: buildTeamOfWorkflow},
	{name: "workflow", kind: "workflow", runner: "flow", build: buildWorkflow},
}

func buildAgent(t *testing.T, rt *agent.Runtime, child *agent.Agent[string]) *ops {
	lead := agent.Must(agent.New("lead", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool && strings.Contains(last.Text(), "refuses") {
			return nil, calf.Permanent(errors.New("the lead gives up: " + last.Text()))
		}
		if last.Role == model.RoleTool {
			return modeltest.Text("lead done"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c1", "child", `{"input":"work"}`)), nil
	}), nil))
	if err := lead.AddSubagent(child, nil); err != nil {
		t.Fatal(err)
	}
	serveAll(t, rt, lead, child)
	return &ops{
		submit: func(ctx context.Context, id string) error {
			_, err := lead.Submit(ctx, rt, "go", &agent.RunOptions{RunID: id})
			return err
		},
		wait: func(ctx context.Context, id string) error {
			_, err := lead.Wait(ctx, rt, id)
			return err
		},
		recover: recoverAll(
			func(ctx context.Context) (int, error) { return child.Recover(ctx, rt, nil) },
			func(ctx context.Context) (int, error) { return lead.Recover(ctx, rt, nil) }),
	}
}

func buildTeam(t *testing.T, rt *agent.Runtime, child *agent.Agent[string]) *ops {
	serveAll(t, rt, child)
	o := teamOf(t, rt, team.AgentMember(child))
	recoverTeam := o.recover
	o.recover = func(ctx context.Context) error {
		if _, err := child.Recover(ctx, rt, nil); err != nil {
			return err
		}
		return recoverTeam(ctx)
	}
	return o
}

func buildTeamOfWorkflow(t *testing.T, rt *agent.Runtime, child *agent.Agent[string]) *ops {
	serveAll(t, rt, child)
	w := childWorkflow(t, "inner", child)
	if err := w.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	m := team.WorkflowMember(w, "the inner workflow",
		func(prompt string) (flowState, error) { return flowState{Prompt: prompt}, nil },
		func(s flowState) (string, error) { return s.Out, nil })
	o := teamOf(t, rt, m)
	recoverTeam := o.recover
	o.recover = func(ctx context.Context) error {
		if _, err := child.Recover(ctx, rt, nil); err != nil {
			return err
		}
		if _, err := w.Recover(ctx, rt, nil); err != nil {
			return err
		}
		return recoverTeam(ctx)
	}
	return o
}

// teamOf serves a sequential team of m then a finisher, so that a step
// boundary follows m's run.
func teamOf(t *testing.T, rt *agent.Runtime, m team.Member) *ops {
	finisher := agent.Must(agent.New("finisher", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("finished"), nil
	}), &agent.Options{Description: "finishes"}))
	serveAll(t, rt, finisher)
	tm := team.Must(team.NewSequential("crew", []team.Member{m, team.AgentMember(finisher)}, nil))
	if err := tm.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return &ops{
		submit: func(ctx context.Context, id string) error {
			_, err := tm.Submit(ctx, rt, "go", &team.RunOptions{RunID: id})
			return err
		},
		wait: func(ctx context.Context, id string) error {
			_, err := tm.Wait(ctx, rt, id)
			return err
		},
		recover: recoverAll(
			func(ctx context.Context) (int, error) { return finisher.Recover(ctx, rt, nil) },
			func(ctx context.Context) (int, error) { return tm.Recover(ctx, rt, nil) }),
	}
}

type flowState struct{ Prompt, Out string }

func childWorkflow(t *testing.T, name string, child *agent.Agent[string]) *workflow.Workflow[flowState] {
	node := workflow.AgentNode(child, func(s flowState) (string, error) { return s.Prompt, nil },
		func(s flowState, out string) (flowState, error) { s.Out = out; return s, nil })
	finish := workflow.Func(func(_ context.Context, s flowState) (flowState, error) { s.Out += "."; return s, nil })
	w, err := workflow.New[flowState](name, nil).Node("work", node).Node("finish", finish).
		Edge(workflow.Start, "work").Edge("work", "finish").Edge("finish", workflow.End).Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func buildWorkflow(t *testing.T, rt *agent.Runtime, child *agent.Agent[string]) *ops {
	serveAll(t, rt, child)
	w := childWorkflow(t, "flow", child)
	if err := w.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return &ops{
		submit: func(ctx context.Context, id string) error {
			_, err := w.Submit(ctx, rt, flowState{Prompt: "go"}, &workflow.RunOptions{RunID: id})
			return err
		},
		wait: func(ctx context.Context, id string) error {
			_, err := w.Wait(ctx, rt, id)
			return err
		},
		recover: recoverAll(
			func(ctx context.Context) (int, error) { return child.Recover(ctx, rt, nil) },
			func(ctx context.Context) (int, error) { return w.Recover(ctx, rt, nil) }),
	}
}

func serveAll(t *testing.T, rt *agent.Runtime, as ...*agent.Agent[string]) {
	t.Helper()
	for _, a := range as {
		if err := a.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// env is a subject served on an in-memory runtime (a process), with a
// record of every message sent. Its store outlives the process: restart
// starts another on a new broker, as after a crash that lost what the
// broker held.
type env struct {
	t   *testing.T
	s   subject
	st  store.Store
	rt  *agent.Runtime
	g   *gate
	ops *ops
	ref func(id string) agent.RunRef

	b     *memory.Broker
	c     *calf.Client
	flaky *flaky

	mu   sync.Mutex
	msgs []*calf.Message
}

func newEnv(t *testing.T, s subject, shut bool) *env {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { _ = st.Close() })
	e := &env{t: t, s: s, st: st, g: newGate(shut)}
	e.ref = func(id string) agent.RunRef { return agent.RunRef{Kind: s.kind, Name: s.runner, RunID: id} }
	e.start()
	return e
}

// start starts a process: a broker, a runtime on it and the subject
// served there.
func (e *env) start() {
	t := e.t
	t.Helper()
	b := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	e.flaky = &flaky{Broker: b, prefix: "calf." + e.s.kind + "." + e.s.runner + "."}
	c := calf.NewClient(e.flaky, nil)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	e.b, e.c, e.rt = b, c, agent.NewRuntime(c, e.st, nil)
	if _, err := b.Subscribe(t.Context(), "calf.>", func(_ context.Context, m *calf.Message) error {
		e.mu.Lock()
		e.msgs = append(e.msgs, m)
		e.mu.Unlock()
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	child := agent.Must(agent.New("child", e.g.model(), &agent.Options{Description: "does the work"}))
	e.ops = e.s.build(t, e.rt, child)
}

// flaky is a broker whose publishes to the subject's own channels fail,
// as to an unreachable broker, while down is set.
type flaky struct {
	calf.Broker
	prefix string
	down   atomic.Bool
}

func (f *flaky) Publish(ctx context.Context, m *calf.Message) error {
	if f.down.Load() && strings.HasPrefix(m.Channel, f.prefix) {
		return calf.Unavailable(errors.New("the broker is unreachable"))
	}
	return f.Broker.Publish(ctx, m)
}

// restart kills the process (its runtime, broker and the messages in
// flight) and starts another on the same store.
func (e *env) restart() {
	e.t.Helper()
	_ = e.c.Close()
	_ = e.b.Close()
	e.start()
}

func (e *env) submit(ctx context.Context, id string) error { return e.ops.submit(ctx, id) }
func (e *env) wait(ctx context.Context, id string) error   { return e.ops.wait(ctx, id) }

// drain waits until the broker has handled every message.
func (e *env) drain(ctx context.Context) error { return e.b.Drain(ctx) }

// outputs counts the distinct output events of the run id on its kind's
// output channel.
func (e *env) outputs(kind, id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range e.msgs {
		if strings.HasPrefix(m.Channel, "calf."+kind+".") && strings.HasSuffix(m.Channel, ".output") && m.Metadata.RunID == id {
			seen[m.ID] = true
		}
	}
	return len(seen)
}

// childRuns returns the child agent's runs in the store.
func (e *env) childRuns(t *testing.T) []*agent.RunInfo {
	t.Helper()
	recs, err := e.rt.Store().List(t.Context(), store.KindRun, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*agent.RunInfo
	for _, rec := range recs {
		info, err := agent.DecodeRunInfo(rec.Data)
		if err != nil {
			t.Fatal(err)
		}
		if info.Agent == "child" {
			out = append(out, info)
		}
	}
	return out
}

// status returns the run's summary status ("paused" for a pause in
// effect), through the runtime's by-name view.
func (e *env) status(t *testing.T, id string) string {
	t.Helper()
	v, err := e.rt.LoadRun(t.Context(), e.ref(id))
	if err != nil {
		t.Fatalf("LoadRun(%+v): %v", e.ref(id), err)
	}
	if got := v.Ref(); got != e.ref(id) {
		t.Fatalf("view of %+v names %+v", e.ref(id), got)
	}
	return runner.SummarizeView(v).Status
}

// viewBudget returns the budget a view of any kind shows.
func viewBudget(v agent.RunView) *agent.Budget {
	switch v := v.(type) {
	case *agent.RunInfo:
		return v.Budget
	case *team.RunInfo:
		return v.Budget
	case *workflow.RunInfo:
		return v.Budget
	}
	return nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestLifecycle runs the same lifecycle cases on a run of each kind,
// through each kind's own calls (Submit, Wait) and the runtime's one
// by-name surface (LoadRun, Cancel, Pause, Resume, SetBudget).
func TestLifecycle(t *testing.T) {
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			t.Run("wait after submit", func(t *testing.T) {
				e := newEnv(t, s, false)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatalf("Wait: %v", err)
				}
				if got := e.status(t, "r1"); got != "complete" {
					t.Errorf("view status %q, want complete", got)
				}
				testwait.For(t, 15*time.Second, "one output event", func() bool { return e.outputs(s.kind, "r1") >= 1 })
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events, want 1", n)
				}
				if n := e.g.calls.Load(); n != 1 {
					t.Errorf("the child's model was called %d times, want 1", n)
				}
			})
			t.Run("wait on an unknown id", func(t *testing.T) {
				e := newEnv(t, s, false)
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				err := e.wait(ctx, "nobody")
				if err == nil || ctx.Err() != nil {
					t.Fatalf("Wait on an unknown id = %v (context %v), want an error before the caller's deadline", err, ctx.Err())
				}
				if _, err := e.rt.LoadRun(t.Context(), e.ref("nobody")); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("LoadRun of an unknown id = %v, want store.ErrNotFound", err)
				}
			})
			t.Run("failed", func(t *testing.T) {
				e := newEnv(t, s, false)
				e.g.fail = true
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				var re *agent.RunError
				if err := e.wait(ctx, "r1"); !errors.As(err, &re) || !errors.Is(err, agent.ErrRunFailed) {
					t.Fatalf("Wait = %v, want a *agent.RunError matching ErrRunFailed", err)
				}
				if got := e.status(t, "r1"); got != "failed" {
					t.Errorf("view status %q, want failed", got)
				}
			})
			t.Run("cancel with children", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered // the child run waits in its model call
				if _, err := e.rt.Cancel(ctx, e.ref("r1"), "called off"); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				if err := e.wait(ctx, "r1"); !errors.Is(err, agent.ErrRunCancelled) {
					t.Fatalf("Wait after Cancel = %v, want ErrRunCancelled", err)
				}
				if got := e.status(t, "r1"); got != "cancelled" {
					t.Errorf("view status %q, want cancelled", got)
				}
				testwait.For(t, 15*time.Second, "the child run cancelled", func() bool {
					runs := e.childRuns(t)
					return len(runs) == 1 && runs[0].Status == agent.RunCancelled
				})
				e.g.release()
				child := e.childRuns(t)[0]
				// The child's model call, let go, changes nothing.
				testwait.For(t, 15*time.Second, "the child's output", func() bool { return e.outputs("agent", child.ID) >= 1 })
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events of the run, want 1", n)
				}
				if n := e.outputs("agent", child.ID); n != 1 {
					t.Errorf("%d output events of the child run, want 1", n)
				}
				if got := e.childRuns(t)[0].Status; got != agent.RunCancelled {
					t.Errorf("child run %s after its model answered, want cancelled", got)
				}
			})
			t.Run("cancel before it starts", func(t *testing.T) {
				e := newEnv(t, s, false)
				ctx := ctxFor(t)
				// Cancelled by name before its input is handled (here:
				// sent): recorded cancelled, it never starts.
				if _, err := e.rt.Cancel(ctx, e.ref("r1"), "not wanted"); err != nil {
					t.Fatalf("Cancel before the run started: %v", err)
				}
				if got := e.status(t, "r1"); got != "cancelled" {
					t.Errorf("view status %q, want cancelled", got)
				}
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if err := e.wait(ctx, "r1"); !errors.Is(err, agent.ErrRunCancelled) {
					t.Fatalf("Wait = %v, want ErrRunCancelled", err)
				}
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.g.calls.Load(); n != 0 {
					t.Errorf("the child's model was called %d times, want 0", n)
				}
				if n := e.outputs(s.kind, "r1"); n > 1 {
					t.Errorf("%d output events, want at most 1", n)
				}
			})
			t.Run("pause and resume at a boundary", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered
				if _, err := e.rt.Pause(ctx, e.ref("r1"), "lunch"); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				if got := e.status(t, "r1"); got != "pausing" && got != "paused" {
					t.Errorf("view status %q after Pause, want pausing or paused", got)
				}
				e.g.release() // the step in progress finishes
				testwait.For(t, 15*time.Second, "the pause in effect", func() bool { return e.status(t, "r1") == "paused" })
				if _, err := e.rt.Resume(ctx, e.ref("r1")); err != nil {
					t.Fatalf("Resume: %v", err)
				}
				// A resume sent twice goes on once: the second changes
				// nothing, or finds the run ended.
				if _, err := e.rt.Resume(ctx, e.ref("r1")); err != nil && !errors.Is(err, agent.ErrRunEnded) {
					t.Fatalf("second Resume: %v", err)
				}
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatalf("Wait after Resume: %v", err)
				}
				if got := e.status(t, "r1"); got != "complete" {
					t.Errorf("view status %q, want complete", got)
				}
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events, want 1", n)
				}
				if n := e.g.calls.Load(); n != 1 {
					t.Errorf("the child's model was called %d times, want 1", n)
				}
				if _, err := e.rt.Pause(ctx, e.ref("r1"), "late"); !errors.Is(err, agent.ErrRunEnded) {
					t.Errorf("Pause of an ended run = %v, want ErrRunEnded", err)
				}
			})
			t.Run("resume whose events were not sent", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered
				if _, err := e.rt.Pause(ctx, e.ref("r1"), "lunch"); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				e.g.release()
				testwait.For(t, 15*time.Second, "the pause in effect", func() bool { return e.status(t, "r1") == "paused" })
				e.flaky.down.Store(true)
				if _, err := e.rt.Resume(ctx, e.ref("r1")); err == nil {
					t.Fatal("Resume with the broker down succeeded")
				}
				e.flaky.down.Store(false)
				// Recorded, not sent: the next Resume sends it.
				if _, err := e.rt.Resume(ctx, e.ref("r1")); err != nil {
					t.Fatalf("Resume again: %v", err)
				}
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatalf("Wait after the second Resume: %v", err)
				}
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events, want 1", n)
				}
			})
			t.Run("pause and resume across a restart", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered
				if _, err := e.rt.Pause(ctx, e.ref("r1"), "maintenance"); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				e.g.release()
				testwait.For(t, 15*time.Second, "the pause in effect", func() bool { return e.status(t, "r1") == "paused" })
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				// The paused run is its record alone: another process
				// resumes it.
				e.restart()
				if got := e.status(t, "r1"); got != "paused" {
					t.Fatalf("view status %q after the restart, want paused", got)
				}
				if _, err := e.rt.Resume(ctx, e.ref("r1")); err != nil {
					t.Fatalf("Resume: %v", err)
				}
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatalf("Wait after Resume: %v", err)
				}
				if n := e.g.calls.Load(); n != 1 {
					t.Errorf("the child's model was called %d times, want 1", n)
				}
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events, want 1", n)
				}
			})
			t.Run("recover after kill", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered
				// The process dies in the child's model call, with the
				// broker's messages: the store alone knows the runs.
				e.restart()
				e.g.release()
				if err := e.ops.recover(ctx); err != nil {
					t.Fatalf("Recover: %v", err)
				}
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatalf("Wait after Recover: %v", err)
				}
				if got := e.status(t, "r1"); got != "complete" {
					t.Errorf("view status %q, want complete", got)
				}
				if err := e.drain(ctx); err != nil {
					t.Fatal(err)
				}
				// The call cut short by the kill, and the one after it.
				if n := e.g.calls.Load(); n != 2 {
					t.Errorf("the child's model was called %d times, want 2", n)
				}
				if n := e.outputs(s.kind, "r1"); n != 1 {
					t.Errorf("%d output events, want 1", n)
				}
				if runs := e.childRuns(t); len(runs) != 1 || runs[0].Status != agent.RunComplete {
					t.Errorf("child runs %d (first %+v), want one, complete", len(runs), runs)
				}
			})
			t.Run("budget", func(t *testing.T) {
				e := newEnv(t, s, true)
				ctx := ctxFor(t)
				if err := e.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-e.g.entered
				want := agent.Budget{MaxModelCalls: 5}
				v, err := e.rt.SetBudget(ctx, e.ref("r1"), &want)
				if err != nil {
					e.g.release()
					t.Fatalf("SetBudget of a %s run: %v", s.kind, err)
				}
				if got := viewBudget(v); got == nil || *got != want {
					t.Errorf("the view SetBudget returned has budget %+v, want %+v", got, want)
				}
				if v, err := e.rt.LoadRun(ctx, e.ref("r1")); err != nil || viewBudget(v) == nil || *viewBudget(v) != want {
					t.Errorf("the run's recorded budget is not the one set (%v)", err)
				}
				// A team's or a workflow's child run in flight gets what the
				// budget leaves it (all of it: nothing has answered); an
				// agent's subagent in flight keeps the part it started with.
				if s.kind != "agent" {
					runs := e.childRuns(t)
					if len(runs) != 1 || runs[0].Budget == nil || *runs[0].Budget != want {
						t.Errorf("the child run's budget is not the run's: %+v", runs)
					}
				}
				e.g.release()
				if err := e.wait(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if _, err := e.rt.SetBudget(ctx, e.ref("r1"), nil); !errors.Is(err, agent.ErrRunEnded) {
					t.Errorf("SetBudget of an ended run = %v, want ErrRunEnded", err)
				}
				if _, err := e.rt.SetBudget(ctx, e.ref("nobody"), nil); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("SetBudget of an unknown run = %v, want store.ErrNotFound", err)
				}
			})
		})
	}
}

// TestUnknownKind checks that a kind the runtime does not know is a clear
// error, not a silent no-op.
func TestUnknownKind(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)
	_, err := rt.Cancel(t.Context(), agent.RunRef{Kind: "team", Name: "crew", RunID: "r1"}, "x")
	if err == nil || !strings.Contains(err.Error(), "AddKind") {
		t.Fatalf("Cancel of a team run on a runtime without the kind = %v, want an error that says to add it", err)
	}
	rt.AddKind(team.Kind, workflow.Kind)
	// Without the team's name, a run not recorded cannot be recorded
	// cancelled.
	if _, err := rt.Cancel(t.Context(), agent.RunRef{Kind: "team", RunID: "r1"}, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Cancel of an unknown team run without its team = %v, want store.ErrNotFound", err)
	}
	if _, err := rt.LoadRun(t.Context(), agent.RunRef{Kind: "workflow", RunID: "r1"}); err == nil {
		t.Fatal("LoadRun of a workflow run without the workflow's name succeeded")
	}
}
