package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/workflow"
)

// workflowEnv, set besides workerEnv, turns a worker process into one that
// serves a workflow instead of W1's agent; its value is a
// workflowWorkerConfig as JSON. A test sets it with t.Setenv before it
// starts workers (h.start passes the environment on), so such a test does
// not run in parallel with others.
const workflowEnv = "CALF_E2E_WORKFLOW"

// workflowWorkerConfig says which workflow a worker serves.
type workflowWorkerConfig struct {
	// Kind is "linear" (a → b → c → d) or "approval" (a → approve → b,
	// where approve waits for an input).
	Kind string `json:"kind"`
	// Name is the workflow's name, unique to the test.
	Name string `json:"name"`
	// CrashNode, when set, names the node that kills its process with
	// SIGKILL as it starts, once per run (a marker in CrashDir records
	// it).
	CrashNode string `json:"crash_node,omitempty"`
	// SleepMillis is how long node a of a "sleeper" (a, sleep, b → c)
	// has the run sleep, unless the run's state says (wfState.Sleep).
	SleepMillis int `json:"sleep_millis,omitempty"`
	// CrashAfterWake has the worker kill itself with SIGKILL right after
	// it published the step event of node b of a run whose id contains
	// crashWakeMark (a sleeper's timer firing, before the timer is
	// removed), once per run (a marker in CrashDir records it).
	CrashAfterWake bool `json:"crash_after_wake,omitempty"`
	// Log has the worker write its client's diagnostics, from level
	// Info, on its standard error.
	Log bool `json:"log,omitempty"`
}

// crashWakeMark, in a run's id, has a worker with CrashAfterWake die
// right after it publishes the run's wake-up.
const crashWakeMark = "-wk-"

// wfState is the state of the test workflows: the nodes that ran, in
// order, the input an interrupted node was resumed with, and how long a
// sleeper's node a has the run sleep (milliseconds; 0: the worker's
// SleepMillis).
type wfState struct {
	Trail []string `json:"trail"`
	Input string   `json:"input,omitempty"`
	Sleep int      `json:"sleep,omitempty"`
}

// executionsFile, in CrashDir, gets a line per start and per end of a node
// function, from every worker process: "{run} {node} start|done {pid}".
const executionsFile = "executions"

// nodeRecorder writes the executions of nodes to the file shared with the
// test, and kills the process at the crash node. A nil *nodeRecorder
// records nothing: the workflow is then only a handle for the caller.
type nodeRecorder struct {
	dir       string
	crashNode string
	rep       *reporter
}

// record appends one line to the executions file, in one write.
func (r *nodeRecorder) record(run, node, phase string) error {
	f, err := os.OpenFile(filepath.Join(r.dir, executionsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s %d\n", run, node, phase, os.Getpid())
	return errors.Join(err, f.Close())
}

// node returns a function node that appends name to the trail. With
// approval it first waits for an input (an interrupt), which it keeps in
// the state.
func (r *nodeRecorder) node(name string, approval bool) workflow.Node[wfState] {
	return workflow.Func(r.fn(name, approval))
}

// fn is the function of node.
func (r *nodeRecorder) fn(name string, approval bool) func(ctx context.Context, s wfState) (wfState, error) {
	return func(ctx context.Context, s wfState) (wfState, error) {
		info, _ := workflow.Info(ctx)
		if r != nil {
			if err := r.record(info.RunID, name, "start"); err != nil {
				return s, err
			}
			if name == r.crashNode && claimCrash(r.dir, info.RunID, "node_"+name) {
				r.rep.crash(info.RunID, "node_"+name)
			}
		}
		if approval {
			var input string
			ok, err := workflow.ResumeInput(ctx, &input)
			if err != nil {
				return s, err
			}
			if !ok {
				if r != nil {
					if err := r.record(info.RunID, name, "interrupt"); err != nil {
						return s, err
					}
				}
				return s, workflow.Interrupt("approve " + strings.Join(s.Trail, ",") + "?")
			}
			s.Input = input
		}
		s.Trail = append(s.Trail, name)
		if r != nil {
			if err := r.record(info.RunID, name, "done"); err != nil {
				return s, err
			}
		}
		return s, nil
	}
}

// buildWorkflow returns the workflow cfg names, its nodes recording
// through r (nil for the caller's handle).
func buildWorkflow(cfg *workflowWorkerConfig, r *nodeRecorder) (*workflow.Workflow[wfState], error) {
	b := workflow.New[wfState](cfg.Name, nil)
	switch cfg.Kind {
	case "linear":
		b.Node("a", r.node("a", false)).
			Node("b", r.node("b", false)).
			Node("c", r.node("c", false)).
			Node("d", r.node("d", false)).
			Edge(workflow.Start, "a").Edge("a", "b").Edge("b", "c").Edge("c", "d").Edge("d", workflow.End)
	case "sleeper":
		a := r.fn("a", false)
		b.Node("a", workflow.Func(func(ctx context.Context, s wfState) (wfState, error) {
			s, err := a(ctx, s)
			if err != nil {
				return s, err
			}
			d := cfg.SleepMillis
			if s.Sleep > 0 {
				d = s.Sleep
			}
			return s, workflow.Sleep(time.Duration(d) * time.Millisecond)
		})).
			Node("b", r.node("b", false)).
			Node("c", r.node("c", false)).
			Edge(workflow.Start, "a").Edge("a", "b").Edge("b", "c").Edge("c", workflow.End)
	case "approval":
		b.Node("a", r.node("a", false)).
			Node("approve", r.node("approve", true)).
			Node("b", r.node("b", false)).
			Edge(workflow.Start, "a").Edge("a", "approve").Edge("approve", "b").Edge("b", workflow.End)
	default:
		return nil, fmt.Errorf("unknown workflow kind %q", cfg.Kind)
	}
	return b.Build()
}

// serveWorkflowWorker is the worker process of a workflow: it serves the
// workflow until ctx ends, when its standard input closes.
func serveWorkflowWorker(ctx context.Context, cfg *workerConfig, wcfg *workflowWorkerConfig) error {
	rep := &reporter{pid: os.Getpid()}
	w, err := buildWorkflow(wcfg, &nodeRecorder{dir: cfg.CrashDir, crashNode: wcfg.CrashNode, rep: rep})
	if err != nil {
		return err
	}
	b, err := openBroker(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	copts := &calf.Options{}
	if wcfg.Log {
		copts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	client := calf.NewClient(&stepBroker{Broker: b, cfg: cfg, wcfg: wcfg, rep: rep}, copts)
	rt := agent.NewRuntime(client, st, nil)
	if err := w.Serve(ctx, rt, nil); err != nil {
		return err
	}
	rep.report(event{Ev: "ready"})
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := client.Shutdown(sctx); err != nil && !errors.Is(err, calf.ErrClosed) {
		return err
	}
	return nil
}

// stepBroker reports each publish of the step events of node b of the
// workflow, by the timers' loop ("wake") or by a handler ("step"), and
// each delivery ("handle"), and kills the process after a wake-up as
// CrashAfterWake says.
type stepBroker struct {
	calf.Broker
	cfg  *workerConfig
	wcfg *workflowWorkerConfig
	rep  *reporter
}

// stepOfB reports whether msg is a step event of node b.
func (b *stepBroker) stepOfB(msg *calf.Message) bool {
	if msg.Channel != workflow.StepChannel(b.wcfg.Name) {
		return false
	}
	var ev workflow.StepEvent
	return json.Unmarshal(msg.Data, &ev) == nil && ev.Node == "b"
}

func (b *stepBroker) Publish(ctx context.Context, msg *calf.Message) error {
	err := b.Broker.Publish(ctx, msg)
	if err != nil || !b.stepOfB(msg) {
		return err
	}
	run := msg.Metadata.RunID
	if _, ok := calf.MessageFromContext(ctx); ok {
		// A handler's: the step emitted again by the run's recovery
		// (the worker that moved the run on died before it said so).
		b.rep.report(event{Ev: "step", Run: run, ID: msg.ID})
		return nil
	}
	// The timers' loop's: a wake-up.
	b.rep.report(event{Ev: "wake", Run: run, ID: msg.ID})
	if b.wcfg.CrashAfterWake && strings.Contains(run, crashWakeMark) && claimCrash(b.cfg.CrashDir, run, "wake") {
		b.rep.crash(run, "wake")
	}
	return nil
}

// Subscribed is the wrapped broker's (see workerBroker.Subscribed).
func (b *stepBroker) Subscribed(channel string) bool { return subscribedOn(b.Broker, channel) }

func (b *stepBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return b.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		if b.stepOfB(msg) {
			b.rep.report(event{Ev: "handle", Run: msg.Metadata.RunID, Channel: msg.Channel, ID: msg.ID, Attempt: msg.Metadata.Attempt})
		}
		return h(ctx, msg)
	}, opts)
}

// execution is a line of the executions file.
type execution struct {
	node, phase string
	pid         int
}

// executions reads what the workers recorded for run, in order.
func executions(t *testing.T, dir, run string) []execution {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, executionsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []execution
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("bad line in %s: %q", executionsFile, sc.Text())
		}
		pid, err := strconv.Atoi(fields[3])
		if err != nil {
			t.Fatalf("bad line in %s: %q", executionsFile, sc.Text())
		}
		if fields[0] == run {
			out = append(out, execution{node: fields[1], phase: fields[2], pid: pid})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// countExecutions returns how many times each node reached phase in run.
func countExecutions(ex []execution, phase string) map[string]int {
	out := map[string]int{}
	for _, e := range ex {
		if e.phase == phase {
			out[e.node]++
		}
	}
	return out
}

// workflowCaller is the caller's side of a workflow test: the workflow,
// not served, on a runtime on the workers' broker and store.
type workflowCaller struct {
	w  *workflow.Workflow[wfState]
	rt *agent.Runtime
}

// startWorkflowWorker starts a worker process that serves the workflow
// wcfg names, on cfg's broker and store, and waits until it serves.
func startWorkflowWorker(t *testing.T, h *harness, cfg *workerConfig, wcfg *workflowWorkerConfig) *proc {
	t.Helper()
	p := spawnWorkflowWorker(t, h, cfg, wcfg)
	h.ready(p)
	return p
}

// spawnWorkflowWorker starts a worker process that serves the workflow
// wcfg names, and does not wait until it serves.
func spawnWorkflowWorker(t *testing.T, h *harness, cfg *workerConfig, wcfg *workflowWorkerConfig) *proc {
	t.Helper()
	raw, err := json.Marshal(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	// h.start passes this process's environment on.
	t.Setenv(workflowEnv, string(raw))
	return h.start(cfg)
}

// newWorkflowCaller returns the caller's side of the workflow wcfg names.
// It removes the records of runs from the shared store when the test
// ends.
func newWorkflowCaller(t *testing.T, cfg *workerConfig, wcfg *workflowWorkerConfig, runs *[]string) *workflowCaller {
	t.Helper()
	w, err := buildWorkflow(wcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st := c.store
		for _, id := range *runs {
			_ = st.Delete(ctx, store.KindWorkflow, wcfg.Name+"/"+id, 0)
			recs, err := st.List(ctx, store.KindCheckpoint, id+"/", "", 100)
			if err != nil {
				continue
			}
			for _, r := range recs {
				_ = st.Delete(ctx, store.KindCheckpoint, r.ID, 0)
			}
		}
	})
	return &workflowCaller{w: w, rt: c.rt}
}

// wait waits in the background for run's next output.
func (c *workflowCaller) wait(t *testing.T, run string) <-chan wfResult {
	ch := make(chan wfResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		s, err := c.w.Wait(ctx, c.rt, run)
		ch <- wfResult{s, err}
	}()
	return ch
}

type wfResult struct {
	state wfState
	err   error
}

// awaitWorkflow waits for a result from ch.
func awaitWorkflow(t *testing.T, run string, ch <-chan wfResult) wfResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout + 5*time.Second):
		t.Fatalf("Wait for run %s did not return", run)
		return wfResult{}
	}
}
