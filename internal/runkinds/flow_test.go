package runkinds_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// flowCode is what a flow-controlled subject's run does: it counts the
// runs in progress per key (the prompt's text before ':'), keeps the
// highest count seen, holds for hold, and answers with its prompt.
type flowCode struct {
	hold    time.Duration
	now     func() time.Time
	mu      sync.Mutex
	running map[string]int
	peak    map[string]int
	now1    int // runs in progress, all keys
	peak1   int
	ran     []string
	starts  []time.Time
	total   atomic.Int64
}

func newFlowCode(hold time.Duration, now func() time.Time) *flowCode {
	return &flowCode{hold: hold, now: now, running: map[string]int{}, peak: map[string]int{}}
}

func flowKey(prompt string) string {
	k, _, _ := strings.Cut(prompt, ":")
	return k
}

func (f *flowCode) run(ctx context.Context, prompt string) (string, error) {
	key := flowKey(prompt)
	f.total.Add(1)
	f.mu.Lock()
	f.running[key]++
	f.peak[key] = max(f.peak[key], f.running[key])
	f.now1++
	f.peak1 = max(f.peak1, f.now1)
	f.ran = append(f.ran, prompt)
	f.starts = append(f.starts, f.now())
	f.mu.Unlock()
	t := time.NewTimer(f.hold)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	f.mu.Lock()
	f.running[key]--
	f.now1--
	f.mu.Unlock()
	return prompt, ctx.Err()
}

// flowModel is a model whose calls run code, with the last message's
// text as the prompt.
func flowModel(code *flowCode) model.Model {
	return modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		out, err := code.run(ctx, req.Messages[len(req.Messages)-1].Text())
		if err != nil {
			return nil, err
		}
		return modeltest.Text(out), nil
	})
}

// flowSubject builds, on one runtime (a worker), a runner of a kind held
// to fc, whose runs run code, and returns how to submit and wait.
type flowSubject struct {
	name, kind, runner string
	build              func(t *testing.T, rt *agent.Runtime, fc *agent.FlowControl, code *flowCode) *ops
}

var flowSubjects = []flowSubject{
	{name: "agent", kind: "agent", runner: "limited", build: func(t *testing.T, rt *agent.Runtime, fc *agent.FlowControl, code *flowCode) *ops {
		// The runs are counted at the model.
		c, err := agent.New("limited", flowModel(code), &agent.Options{Flow: fc})
		if err != nil {
			t.Fatal(err)
		}
		serveAll(t, rt, c)
		return &ops{
			submitPrompt: func(ctx context.Context, id, prompt string) error {
				_, err := c.Submit(ctx, rt, prompt, &agent.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := c.Wait(ctx, rt, id); return err },
		}
	}},
	{name: "team", kind: "team", runner: "crew", build: func(t *testing.T, rt *agent.Runtime, fc *agent.FlowControl, code *flowCode) *ops {
		c, err := agent.New("member", flowModel(code), nil)
		if err != nil {
			t.Fatal(err)
		}
		serveAll(t, rt, c)
		tm := team.Must(team.NewSequential("crew", []team.Member{team.AgentMember(c)}, &team.Options{Flow: fc}))
		if err := tm.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		return &ops{
			submitPrompt: func(ctx context.Context, id, prompt string) error {
				_, err := tm.Submit(ctx, rt, prompt, &team.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := tm.Wait(ctx, rt, id); return err },
		}
	}},
	{name: "workflow", kind: "workflow", runner: "flow", build: func(t *testing.T, rt *agent.Runtime, fc *agent.FlowControl, code *flowCode) *ops {
		type st struct{ Prompt, Out string }
		wf := workflow.New[st]("flow", &workflow.Options{Flow: fc}).
			Node("work", workflow.Func(func(ctx context.Context, s st) (st, error) {
				out, err := code.run(ctx, s.Prompt)
				s.Out = out
				return s, err
			})).
			Edge(workflow.Start, "work").Edge("work", workflow.End).MustBuild()
		if err := wf.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		return &ops{
			submitPrompt: func(ctx context.Context, id, prompt string) error {
				_, err := wf.Submit(ctx, rt, st{Prompt: prompt}, &workflow.RunOptions{RunID: id})
				return err
			},
			wait: func(ctx context.Context, id string) error { _, err := wf.Wait(ctx, rt, id); return err },
		}
	}},
}

// flowKeyOf is the subjects' FlowControl.Key: the prompt's key, read
// from a workflow's state when there is no prompt.
func flowKeyOf(in agent.FlowInput) string {
	if in.Prompt != "" {
		return flowKey(in.Prompt)
	}
	i := strings.Index(string(in.Input), `"Prompt":"`)
	if i < 0 {
		return ""
	}
	return flowKey(string(in.Input)[i+len(`"Prompt":"`):])
}

// workers serves s with fc on n runtimes (workers) sharing one broker
// and one store, and returns their ops.
func workers(t *testing.T, s flowSubject, n int, fc *agent.FlowControl, code *flowCode, opts *agent.RuntimeOptions) ([]*ops, []*agent.Runtime) {
	b := memory.New(nil)
	st := storemem.New()
	t.Cleanup(func() { _ = b.Close() })
	var all []*ops
	var rts []*agent.Runtime
	for range n {
		c := calf.NewClient(b, nil)
		t.Cleanup(func() { _ = c.Close() })
		var o agent.RuntimeOptions
		if opts != nil {
			o = *opts
		}
		rt := agent.NewRuntime(c, st, &o)
		all = append(all, s.build(t, rt, fc, code))
		rts = append(rts, rt)
	}
	return all, rts
}

// TestFlowConcurrency holds the runs of many keys to two each over three
// workers: never more than two run at once under one key, and every run
// completes once. CALF_FLOW_RUNS sets the runs per key (default 6; 100
// is the 10,000 runs over 100 keys).
func TestFlowConcurrency(t *testing.T) {
	keys, perKey := 10, 6
	if n, err := strconv.Atoi(os.Getenv("CALF_FLOW_RUNS")); err == nil && n > 0 {
		keys, perKey = 100, n
	}
	for _, s := range flowSubjects {
		t.Run(s.name, func(t *testing.T) {
			code := newFlowCode(5*time.Millisecond, time.Now)
			fc := &agent.FlowControl{Key: flowKeyOf, Concurrency: 2}
			// CALF_FLOW_OFF=1 runs the same without flow control: the
			// floor of the figure in docs/benchmarks.md.
			off := os.Getenv("CALF_FLOW_OFF") == "1"
			if off {
				fc = nil
			}
			began := time.Now()
			ws, _ := workers(t, s, 3, fc, code, &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			var ids []string
			for i := range keys * perKey {
				id := fmt.Sprintf("r%d", i)
				ids = append(ids, id)
				if err := ws[i%len(ws)].submitPrompt(ctx, id, fmt.Sprintf("k%d: task %d", i%keys, i)); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(ids))
			sem := make(chan struct{}, 64)
			for i, id := range ids {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if err := ws[(i+1)%len(ws)].wait(ctx, id); err != nil {
						errs <- fmt.Errorf("run %s: %w", id, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			took := time.Since(began)
			if got := code.total.Load(); got != int64(len(ids)) {
				t.Errorf("the runs' code ran %d times for %d runs", got, len(ids))
			}
			code.mu.Lock()
			defer code.mu.Unlock()
			if off {
				t.Logf("%d runs over %d keys without flow control: %s, peak %d at once", len(ids), keys, took, code.peak1)
				return
			}
			reached := 0
			for k, p := range code.peak {
				if p > 2 {
					t.Errorf("key %s: %d runs at once, over the limit of 2", k, p)
				}
				if p == 2 {
					reached++
				}
			}
			if reached == 0 {
				t.Error("no key ever had two runs at once: the limit was not what held them")
			}
			t.Logf("%d runs over %d keys: %d keys reached 2 at once; %s", len(ids), keys, reached, took)
		})
	}
}

// TestFlowDebounce sends a burst of inputs of one key within the
// debounce window: one run starts, with the last input; the others end
// cancelled, each caller's wait answered.
func TestFlowDebounce(t *testing.T) {
	for _, s := range flowSubjects {
		t.Run(s.name, func(t *testing.T) {
			code := newFlowCode(0, time.Now)
			fc := &agent.FlowControl{Key: flowKeyOf, Debounce: 300 * time.Millisecond}
			ws, rts := workers(t, s, 2, fc, code, &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
			ctx := ctxFor(t)
			const n = 50
			for i := range n {
				if err := ws[i%2].submitPrompt(ctx, fmt.Sprintf("d%d", i), fmt.Sprintf("k: input %d", i)); err != nil {
					t.Fatal(err)
				}
			}
			last := fmt.Sprintf("d%d", n-1)
			if err := ws[0].wait(ctx, last); err != nil {
				t.Fatalf("the last input's run: %v", err)
			}
			for i := range n - 1 {
				id := fmt.Sprintf("d%d", i)
				err := ws[1].wait(ctx, id)
				if err == nil {
					t.Errorf("run %s, replaced, ended without an error", id)
				}
				v, lerr := rts[0].LoadRun(ctx, agent.RunRef{Kind: s.kind, Name: s.runner, RunID: id})
				if lerr != nil {
					t.Fatalf("load replaced run %s: %v", id, lerr)
				}
				if v.RunStatus() != agent.RunCancelled {
					t.Errorf("replaced run %s: status %s, want cancelled", id, v.RunStatus())
				}
			}
			code.mu.Lock()
			defer code.mu.Unlock()
			if len(code.ran) != 1 || code.ran[0] != fmt.Sprintf("k: input %d", n-1) {
				t.Fatalf("the code ran with %q, want once with the last input", code.ran)
			}
		})
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestFlowRate holds one key to 10 runs a second, on a clock the test
// moves 100 ms at a time: over a minute of that clock with more runs
// waiting than the rate allows, the runs started are within 10% of 600.
func TestFlowRate(t *testing.T) {
	for _, s := range flowSubjects {
		t.Run(s.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
			code := newFlowCode(0, clock.Now)
			fc := &agent.FlowControl{Key: flowKeyOf, Rate: 10, Per: time.Second}
			ws, rts := workers(t, s, 2, fc, code, &agent.RuntimeOptions{FlowPoll: 5 * time.Millisecond, Now: clock.Now})
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			const n = 700
			for i := range n {
				if err := ws[i%2].submitPrompt(ctx, fmt.Sprintf("q%d", i), fmt.Sprintf("k: %d", i)); err != nil {
					t.Fatal(err)
				}
			}
			start := clock.Now()
			ref := agent.RunRef{Kind: s.kind, Name: s.runner}
			for clock.Now().Sub(start) < time.Minute {
				// Let the workers take what the rate allows now (one run
				// each 100 ms): the clock moves on once they have, or
				// after long enough for a loaded machine's passes.
				before := code.total.Load()
				testwait.Until(t, 3*time.Second, func() bool { return code.total.Load() > before })
				clock.Advance(100 * time.Millisecond)
			}
			code.mu.Lock()
			started := 0
			for _, at := range code.starts {
				if at.Sub(start) < time.Minute {
					started++
				}
			}
			code.mu.Unlock()
			stats, err := rts[0].Flow(ctx, ref, agent.FlowInput{Prompt: "k: x"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d runs started within a minute at 10/s; %d still waiting", started, stats.Waiting)
			if started < 540 || started > 660 {
				t.Fatalf("%d runs started within a minute at 10 a second, want 600 within 10%%", started)
			}
			if stats.Waiting == 0 {
				t.Fatal("no run waits: the rate did not hold any back")
			}
		})
	}
}

// TestFlowWaitsAsRecords shows that a run over the limit waits as a
// record that a caller's wait knows of, and that a runtime that did not
// take it starts it once the slot frees up.
func TestFlowWaitsAsRecords(t *testing.T) {
	s := flowSubjects[0]
	code := newFlowCode(300*time.Millisecond, time.Now)
	fc := &agent.FlowControl{Key: flowKeyOf, Concurrency: 1}
	ws, rts := workers(t, s, 2, fc, code, &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
	ctx := ctxFor(t)
	for i := range 3 {
		if err := ws[0].submitPrompt(ctx, fmt.Sprintf("w%d", i), "k: x"); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "two runs waiting", func() bool {
		st, err := rts[1].Flow(ctx, agent.RunRef{Name: "limited"}, agent.FlowInput{Prompt: "k: x"})
		return err == nil && st.Running == 1 && st.Waiting == 2
	})
	recs, err := rts[0].Store().List(ctx, flow.KindWait, "", "", 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("waiting records: %d, %v; want 2", len(recs), err)
	}
	// A waiting run has no record of its own yet: its view is a queued
	// run's, by name and through runner.LoadRun.
	queued, err := rts[0].Store().List(ctx, flow.KindRun, "", "", 0)
	if err != nil || len(queued) != 2 {
		t.Fatalf("queued runs: %d, %v; want 2", len(queued), err)
	}
	for _, rec := range queued {
		v, err := rts[1].LoadRun(ctx, agent.RunRef{Name: "limited", RunID: rec.ID})
		q, ok := v.(*agent.QueuedRun)
		if err != nil || !ok || q.RunStatus() != agent.RunQueued || q.Ref() != (agent.RunRef{Kind: "agent", Name: "limited", RunID: rec.ID}) || q.Key != "k" {
			t.Fatalf("the view of queued run %s: %#v, %v", rec.ID, v, err)
		}
		if _, err := rts[1].LoadRun(ctx, agent.RunRef{Name: "other", RunID: rec.ID}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("queued run %s loaded as another agent's: %v", rec.ID, err)
		}
		r, err := runner.LoadRun(ctx, rts[1].Store(), rec.ID)
		if err != nil || r.Queued == nil || r.Summary.Status != "queued" || r.Summary.Kind != "agent" || r.View().RunStatus() != agent.RunQueued {
			t.Fatalf("runner.LoadRun of queued run %s: %+v, %v", rec.ID, r, err)
		}
	}
	for i := range 3 {
		if err := ws[1].wait(ctx, fmt.Sprintf("w%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if code.total.Load() != 3 {
		t.Fatalf("code ran %d times, want 3", code.total.Load())
	}
	for _, kind := range []string{flow.KindWait, flow.KindRun} {
		if recs, err := rts[0].Store().List(ctx, kind, "", "", 0); err != nil || len(recs) != 0 {
			t.Fatalf("%s records left: %d, %v", kind, len(recs), err)
		}
	}
	_, err = rts[0].LoadRun(ctx, agent.RunRef{Name: "limited", RunID: "nope"})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown run: %v", err)
	}
}

// TestFlowPriority bounds a runner to one run at a time across keys:
// while one runs, five runs of a low-priority key come, then five of a
// high-priority key; all the high ones start before any low one.
func TestFlowPriority(t *testing.T) {
	for _, s := range flowSubjects {
		t.Run(s.name, func(t *testing.T) {
			code := newFlowCode(30*time.Millisecond, time.Now)
			fc := &agent.FlowControl{Key: flowKeyOf, MaxRunning: 1, Priority: func(in agent.FlowInput) int {
				if flowKeyOf(in) == "high" {
					return 10
				}
				return 0
			}}
			ws, _ := workers(t, s, 2, fc, code, &agent.RuntimeOptions{FlowPoll: 10 * time.Millisecond})
			ctx := ctxFor(t)
			if err := ws[0].submitPrompt(ctx, "first", "first: x"); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 10*time.Second, "the first run", func() bool { return code.total.Load() == 1 })
			var ids []string
			for _, key := range []string{"low", "high"} {
				for i := range 5 {
					id := fmt.Sprintf("%s%d", key, i)
					ids = append(ids, id)
					if err := ws[i%2].submitPrompt(ctx, id, fmt.Sprintf("%s: %d", key, i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, id := range ids {
				if err := ws[1].wait(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			code.mu.Lock()
			defer code.mu.Unlock()
			if code.peak1 != 1 {
				t.Errorf("%d runs at once, over the bound of 1", code.peak1)
			}
			var order []string
			for _, p := range code.ran[1:] {
				order = append(order, flowKey(p))
			}
			want := []string{"high", "high", "high", "high", "high", "low", "low", "low", "low", "low"}
			if strings.Join(order, " ") != strings.Join(want, " ") {
				t.Fatalf("runs started in the order %v, want %v", order, want)
			}
		})
	}
}

// TestFlowControlChecked refuses a runner of each kind whose flow
// control cannot hold.
func TestFlowControlChecked(t *testing.T) {
	for _, fc := range []*agent.FlowControl{{Concurrency: -1}, {Rate: 5}, {Debounce: -time.Second}, {MaxRunning: -2}} {
		if _, err := agent.New("a", modeltest.FunctionModel(nil), &agent.Options{Flow: fc}); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("agent with %+v: %v", *fc, err)
		}
		c, err := agent.New("m", modeltest.FunctionModel(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := team.NewSequential("crew", []team.Member{team.AgentMember(c)}, &team.Options{Flow: fc}); !errors.Is(err, team.ErrInvalidTeam) {
			t.Errorf("team with %+v: %v", *fc, err)
		}
		_, err = workflow.New[struct{}]("flow", &workflow.Options{Flow: fc}).
			Node("n", workflow.Func(func(_ context.Context, s struct{}) (struct{}, error) { return s, nil })).
			Edge(workflow.Start, "n").Edge("n", workflow.End).Build()
		if !errors.Is(err, workflow.ErrInvalidWorkflow) {
			t.Errorf("workflow with %+v: %v", *fc, err)
		}
	}
}
