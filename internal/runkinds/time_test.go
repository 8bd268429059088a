package runkinds_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// waitCode is what every timed subject's run does, in a custom agent's
// step or a workflow's node: wait at the gate (held by the test), wait
// for the signal "go" (at most timeout), sleep for nap, and answer with
// what it got. It counts how many times it ran.
type waitCode struct {
	gate    chan struct{}
	timeout time.Duration
	nap     time.Duration
	runs    atomic.Int64
	entered chan struct{} // a token each time the code reaches the gate
	mu      sync.Mutex
	got     []string
}

func newWaitCode(timeout, nap time.Duration) *waitCode {
	return &waitCode{gate: make(chan struct{}), timeout: timeout, nap: nap, entered: make(chan struct{}, 16)}
}

func (w *waitCode) first() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return ""
	}
	return w.got[0]
}

func (w *waitCode) record(s string) string {
	w.mu.Lock()
	w.got = append(w.got, s)
	w.mu.Unlock()
	return s
}

// timedSubject is a kind of run whose own code waits: an agent (a custom
// agent), a team (of that custom agent, which takes the team's signals),
// a workflow (a function node).
type timedSubject struct {
	name, kind, runner string
	build              func(t *testing.T, rt *agent.Runtime, w *waitCode) *ops
}

func customWaiter(t *testing.T, name string, w *waitCode) *agent.Custom[struct{}, string] {
	c, err := agent.NewCustom(name, func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
		w.runs.Add(1)
		w.entered <- struct{}{}
		<-w.gate
		var v string
		ok, err := sc.WaitSignal("go", w.timeout, &v)
		if err != nil {
			return "", err
		}
		if !ok {
			v = "timed out"
		}
		if err := sc.Sleep(w.nap); err != nil {
			return "", err
		}
		return w.record(v), nil
	}, &agent.CustomOptions{Description: "waits"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var timedSubjects = []timedSubject{
	{name: "agent", kind: "agent", runner: "waiter", build: func(t *testing.T, rt *agent.Runtime, w *waitCode) *ops {
		c := customWaiter(t, "waiter", w)
		serveAll(t, rt, c.Agent)
		return &ops{
			submit: func(ctx context.Context, id string) error {
				_, err := c.Submit(ctx, rt, "go", &agent.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := c.Wait(ctx, rt, id); return err },
		}
	}},
	{name: "team", kind: "team", runner: "crew", build: func(t *testing.T, rt *agent.Runtime, w *waitCode) *ops {
		c := customWaiter(t, "member", w)
		serveAll(t, rt, c.Agent)
		tm := team.Must(team.NewSequential("crew", []team.Member{team.AgentMember(c.Agent)}, nil))
		if err := tm.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		return &ops{
			submit: func(ctx context.Context, id string) error {
				_, err := tm.Submit(ctx, rt, "go", &team.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := tm.Wait(ctx, rt, id); return err },
		}
	}},
	{name: "workflow", kind: "workflow", runner: "flow", build: func(t *testing.T, rt *agent.Runtime, w *waitCode) *ops {
		type st struct{ Out string }
		wf := workflow.New[st]("flow", nil).
			Node("wait", workflow.Func(func(ctx context.Context, s st) (st, error) {
				w.runs.Add(1)
				w.entered <- struct{}{}
				<-w.gate
				ok, err := workflow.WaitSignal(ctx, "go", w.timeout, &s.Out)
				if err != nil {
					return s, err
				}
				if !ok {
					s.Out = "timed out"
				}
				return s, workflow.Sleep(w.nap)
			})).
			Node("done", workflow.Func(func(_ context.Context, s st) (st, error) { w.record(s.Out); return s, nil })).
			Edge(workflow.Start, "wait").Edge("wait", "done").Edge("done", workflow.End).MustBuild()
		if err := wf.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		return &ops{
			submit: func(ctx context.Context, id string) error {
				_, err := wf.Submit(ctx, rt, st{}, &workflow.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := wf.Wait(ctx, rt, id); return err },
		}
	}},
}

// TestTimeLifecycle runs the cases of durable time on a run of each
// kind, through the runtime's one Signal: a signal sent while the run
// waits, one sent before it waits (kept), a wait that times out, a sleep,
// and signals to an ended and an unknown run.
func TestTimeLifecycle(t *testing.T) {
	for _, s := range timedSubjects {
		t.Run(s.name, func(t *testing.T) {
			setup := func(t *testing.T, timeout, nap time.Duration) (*agent.Runtime, *waitCode, *ops, func(string) agent.RunRef) {
				b := memory.New(nil)
				c := calf.NewClient(b, nil)
				t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
				rt := agent.NewRuntime(c, storemem.New(), &agent.RuntimeOptions{TimerPoll: 20 * time.Millisecond})
				w := newWaitCode(timeout, nap)
				o := s.build(t, rt, w)
				return rt, w, o, func(id string) agent.RunRef { return agent.RunRef{Kind: s.kind, Name: s.runner, RunID: id} }
			}
			t.Run("signal while waiting", func(t *testing.T) {
				rt, w, o, ref := setup(t, 0, 0)
				ctx := ctxFor(t)
				if err := o.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-w.entered
				close(w.gate)
				// The code waits: its waiter is recorded.
				testwait.For(t, 10*time.Second, "the wait", func() bool {
					recs, err := rt.Store().List(ctx, signals.KindWaiter, "", "", 0)
					return err == nil && len(recs) == 1
				})
				if _, err := rt.Signal(ctx, ref("r1"), "go", "green"); err != nil {
					t.Fatal(err)
				}
				if err := o.wait(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if w.first() != "green" {
					t.Errorf("got %q", w.first())
				}
				if _, err := rt.Signal(ctx, ref("r1"), "go", "again"); !errors.Is(err, agent.ErrRunEnded) {
					t.Errorf("a signal to the ended run: %v, want ErrRunEnded", err)
				}
				if _, err := rt.Signal(ctx, ref("nobody"), "go", "x"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("a signal to an unknown run: %v, want store.ErrNotFound", err)
				}
				// The retention sweep removes the run's signals and the
				// records of its waits with it.
				if n, err := rt.Store().List(ctx, signals.Kind, "", "", 0); err != nil || len(n) == 0 {
					t.Fatalf("no signal recorded before the sweep: %v", err)
				}
				if _, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now().Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				for _, kind := range []string{signals.Kind, signals.KindCall, signals.KindWaiter, signals.KindCursor} {
					if recs, err := rt.Store().List(ctx, kind, "", "", 0); err != nil || len(recs) != 0 {
						t.Errorf("%d records of kind %s left after the sweep (%v)", len(recs), kind, err)
					}
				}
			})
			t.Run("signal before the wait", func(t *testing.T) {
				rt, w, o, ref := setup(t, 0, 0)
				ctx := ctxFor(t)
				if err := o.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				<-w.entered // the code holds at the gate: it has not waited yet
				if _, err := rt.Signal(ctx, ref("r1"), "go", "early"); err != nil {
					t.Fatal(err)
				}
				close(w.gate)
				if err := o.wait(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if w.first() != "early" {
					t.Errorf("got %q", w.first())
				}
				if n := w.runs.Load(); n != 1 {
					t.Errorf("the code ran %d times, want once: the kept signal needs no wake", n)
				}
			})
			t.Run("timeout", func(t *testing.T) {
				_, w, o, _ := setup(t, 200*time.Millisecond, 0)
				ctx := ctxFor(t)
				start := time.Now()
				if err := o.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				close(w.gate)
				if err := o.wait(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if w.first() != "timed out" || time.Since(start) < 200*time.Millisecond {
					t.Errorf("got %q after %s, want the timeout's value after 200ms", w.first(), time.Since(start))
				}
			})
			t.Run("sleep", func(t *testing.T) {
				rt, w, o, ref := setup(t, 0, 300*time.Millisecond)
				ctx := ctxFor(t)
				if err := o.submit(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				close(w.gate)
				<-w.entered
				if _, err := rt.Signal(ctx, ref("r1"), "go", "then nap"); err != nil {
					t.Fatal(err)
				}
				signalled := time.Now()
				if err := o.wait(ctx, "r1"); err != nil {
					t.Fatal(err)
				}
				if el := time.Since(signalled); el < 300*time.Millisecond {
					t.Errorf("the run ended %s after the signal, before its sleep of 300ms", el)
				}
				if w.first() != "then nap" {
					t.Errorf("got %q", w.first())
				}
			})
		})
	}
}
