package runkinds_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// keyed is a kind of run whose Run takes a caller's idempotency key,
// on a runtime of one process (a broker of its own) over a shared store.
type keyed struct {
	name string
	// run runs the kind's runner with prompt under key, and returns its
	// answer and run id.
	run func(ctx context.Context, t *testing.T, rt *agent.Runtime, prompt, key string) (string, string, error)
}

// echoAgent is served on rt: its model counts its calls and echoes.
func echoAgent(t *testing.T, rt *agent.Runtime, calls *atomic.Int64) *agent.Agent[string] {
	a := agent.Must(agent.New("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		calls.Add(1)
		return modeltest.Text("echo: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), &agent.Options{Description: "echoes"}))
	serveAll(t, rt, a)
	return a
}

var keyedKinds = []keyed{
	{name: "agent", run: func(ctx context.Context, t *testing.T, rt *agent.Runtime, prompt, key string) (string, string, error) {
		var calls atomic.Int64
		a := echoAgent(t, rt, &calls)
		out, err := a.Run(ctx, rt, prompt, &agent.RunOptions{IdempotencyKey: key})
		if err != nil {
			return "", "", err
		}
		return out.Output, out.RunID, nil
	}},
	{name: "team", run: func(ctx context.Context, t *testing.T, rt *agent.Runtime, prompt, key string) (string, string, error) {
		var calls atomic.Int64
		a := echoAgent(t, rt, &calls)
		tm := team.Must(team.NewSequential("pair", []team.Member{team.AgentMember(a)}, nil))
		if err := tm.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := tm.Run(ctx, rt, prompt, &team.RunOptions{IdempotencyKey: key})
		if err != nil {
			return "", "", err
		}
		return out.Output, out.RunID, nil
	}},
	{name: "workflow", run: func(ctx context.Context, t *testing.T, rt *agent.Runtime, prompt, key string) (string, string, error) {
		type st struct{ In, Out, Run string }
		w := workflow.New[st]("upper", nil).
			Node("one", workflow.Func(func(ctx context.Context, s st) (st, error) {
				info, _ := workflow.Info(ctx)
				s.Out, s.Run = "done: "+s.In, info.RunID
				return s, nil
			})).Edge(workflow.Start, "one").Edge("one", workflow.End).MustBuild()
		if err := w.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := w.Run(ctx, rt, st{In: prompt}, &workflow.RunOptions{IdempotencyKey: key})
		if err != nil {
			return "", "", err
		}
		return out.Out, out.Run, nil
	}},
}

// A caller sends the same request under the same key five times, the
// last two after the process restarted: one run, one answer; another
// request under the key is refused; another key is another run.
func TestIdempotencyKeys(t *testing.T) {
	for _, k := range keyedKinds {
		t.Run(k.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "calf.db")
			process := func() (*agent.Runtime, func()) {
				st, err := sqlite.Open(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				b := memory.New(nil)
				c := calf.NewClient(b, nil)
				return agent.NewRuntime(c, st, nil), func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			rt, stop := process()
			var first, firstRun string
			for i := range 5 {
				if i == 3 {
					stop()
					rt, stop = process()
				}
				got, run, err := k.run(ctx, t, rt, "hello", "key-1")
				if err != nil {
					t.Fatalf("send %d: %v", i+1, err)
				}
				if i == 0 {
					first, firstRun = got, run
					continue
				}
				if got != first || run != firstRun {
					t.Errorf("send %d: %q in run %s, want %q in run %s", i+1, got, run, first, firstRun)
				}
			}
			defer stop()
			if _, _, err := k.run(ctx, t, rt, "something else", "key-1"); !errors.Is(err, agent.ErrIdempotencyConflict) {
				t.Errorf("another request under the key: %v, want ErrIdempotencyConflict", err)
			}
			_, run, err := k.run(ctx, t, rt, "hello", "key-2")
			if err != nil || run == firstRun {
				t.Errorf("another key: run %s (%v), want a new run", run, err)
			}
			recs, err := rt.Store().List(ctx, "idempotency", "", "", 0)
			if err != nil || len(recs) != 2 {
				t.Errorf("%d key records (%v), want 2", len(recs), err)
			}
		})
	}
}
