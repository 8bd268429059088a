package runkinds_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// TestSignalToQueuedRun sends a signal to a run that waits under flow
// control before it starts, of each kind: an agent's and a workflow's
// run keep it, and their first wait for it, once they start, takes it;
// a team's run, which has no member run to take it yet, refuses it and
// says why.
func TestSignalToQueuedRun(t *testing.T) {
	one := &agent.FlowControl{Concurrency: 1}
	type subject struct {
		kind, name string
		submit     func(ctx context.Context, id string) error
		wait       func(ctx context.Context, id string) (string, error)
	}
	build := map[string]func(t *testing.T, rt *agent.Runtime) subject{
		"agent": func(t *testing.T, rt *agent.Runtime) subject {
			c, err := agent.NewCustom("gated", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
				var v string
				if _, err := sc.WaitSignal("go", 0, &v); err != nil {
					return "", err
				}
				return v, nil
			}, &agent.CustomOptions{Flow: one})
			if err != nil {
				t.Fatal(err)
			}
			serveAll(t, rt, c.Agent)
			return subject{"agent", "gated",
				func(ctx context.Context, id string) error {
					_, err := c.Submit(ctx, rt, "go", &agent.RunOptions{RunID: id})
					return err
				},
				func(ctx context.Context, id string) (string, error) {
					out, err := c.Wait(ctx, rt, id)
					if err != nil {
						return "", err
					}
					return out.Output, nil
				}}
		},
		"workflow": func(t *testing.T, rt *agent.Runtime) subject {
			type st struct{ Out string }
			wf := workflow.New[st]("gated", &workflow.Options{Flow: one}).
				Node("wait", workflow.Func(func(ctx context.Context, s st) (st, error) {
					_, err := workflow.WaitSignal(ctx, "go", 0, &s.Out)
					return s, err
				})).
				Edge(workflow.Start, "wait").Edge("wait", workflow.End).MustBuild()
			if err := wf.Serve(t.Context(), rt, nil); err != nil {
				t.Fatal(err)
			}
			return subject{"workflow", "gated",
				func(ctx context.Context, id string) error {
					_, err := wf.Submit(ctx, rt, st{}, &workflow.RunOptions{RunID: id})
					return err
				},
				func(ctx context.Context, id string) (string, error) {
					out, err := wf.Wait(ctx, rt, id)
					return out.Out, err
				}}
		},
	}
	for _, kind := range []string{"agent", "workflow"} {
		t.Run(kind, func(t *testing.T) {
			b := memory.New(nil)
			c := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
			rt := agent.NewRuntime(c, storemem.New(), &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
			s := build[kind](t, rt)
			ctx := ctxFor(t)
			ref := func(id string) agent.RunRef { return agent.RunRef{Kind: s.kind, Name: s.name, RunID: id} }
			if err := s.submit(ctx, "q1"); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 10*time.Second, "the first run to wait for its signal", func() bool {
				recs, err := rt.Store().List(ctx, "signal_waiter", kind+"/gated/q1/", "", 0)
				return err == nil && len(recs) == 1
			})
			if err := s.submit(ctx, "q2"); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 10*time.Second, "the second run to be queued", func() bool {
				v, err := rt.LoadRun(ctx, ref("q2"))
				return err == nil && v.RunStatus() == agent.RunQueued
			})
			// Its input delivered again goes back to its place in the
			// queue: it does not start the run past the limit.
			if err := s.submit(ctx, "q2"); err != nil {
				t.Fatal(err)
			}
			if err := b.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if v, err := rt.LoadRun(ctx, ref("q2")); err != nil || v.RunStatus() != agent.RunQueued {
				t.Fatalf("the queued run after its input came again: %v, %v", v, err)
			}
			v, err := rt.Signal(ctx, ref("q2"), "go", "second")
			if err != nil || v.RunStatus() != agent.RunQueued {
				t.Fatalf("a signal to the queued run: %v, %v", v, err)
			}
			if _, err := rt.Signal(ctx, ref("q1"), "go", "first"); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]string{"q1": "first", "q2": "second"} {
				if got, err := s.wait(ctx, id); err != nil || got != want {
					t.Errorf("run %s: %q, %v; want %q", id, got, err, want)
				}
			}
			// The queue's records of a run go once its input is handed on.
			testwait.For(t, 10*time.Second, "no queued run left", func() bool {
				recs, err := rt.Store().List(ctx, flow.KindRun, "", "", 0)
				return err == nil && len(recs) == 0
			})
		})
	}
	t.Run("team", func(t *testing.T) {
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
		rt := agent.NewRuntime(c, storemem.New(), &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
		member, err := agent.NewCustom("member", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
			var v string
			_, err := sc.WaitSignal("go", 0, &v)
			return v, err
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		serveAll(t, rt, member.Agent)
		tm := team.Must(team.NewSequential("crew", []team.Member{team.AgentMember(member.Agent)}, &team.Options{Flow: one}))
		if err := tm.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor(t)
		if _, err := tm.Submit(ctx, rt, "go", &team.RunOptions{RunID: "t1"}); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "the first run's member to wait for its signal", func() bool {
			recs, err := rt.Store().List(ctx, "signal_waiter", "agent/member/", "", 0)
			return err == nil && len(recs) == 1
		})
		if _, err := tm.Submit(ctx, rt, "go", &team.RunOptions{RunID: "t2"}); err != nil {
			t.Fatal(err)
		}
		queued := "t2"
		testwait.For(t, 10*time.Second, "the second run to be queued", func() bool {
			v, err := rt.LoadRun(ctx, agent.RunRef{Kind: "team", Name: "crew", RunID: queued})
			return err == nil && v.RunStatus() == agent.RunQueued
		})
		_, err = rt.Signal(ctx, agent.RunRef{Kind: "team", Name: "crew", RunID: queued}, "go", "early")
		if err == nil || !strings.Contains(err.Error(), "flow control") || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a signal to a queued team run: %v, want an error that says it waits under flow control", err)
		}
	})
}
