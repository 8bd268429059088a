package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testproc"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// waitTimeout bounds every wait of a test for something a worker does.
const waitTimeout = 90 * time.Second

// harness runs worker processes against a fake model server in this
// process, and collects what they report.
type harness struct {
	t     *testing.T
	model *modeltest.Server

	mu      sync.Mutex
	calls   map[string]map[int]int // model calls by run and step
	events  []event
	changed chan struct{} // closed and replaced when events grow
	procs   []*proc
}

// proc is a worker process.
type proc struct {
	*testproc.Process
	pid    int
	mu     sync.Mutex
	stderr bytes.Buffer
}

// log adds a line to what the process wrote on its standard error.
func (p *proc) log(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stderr.Write(line)
	p.stderr.WriteByte('\n')
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, calls: map[string]map[int]int{}, changed: make(chan struct{})}
	h.model = modeltest.NewServer(h.answer)
	t.Cleanup(h.model.Close)
	t.Cleanup(h.stopAll)
	return h
}

// answer is W1's model: a call of add(2, 3) first, then the sum once the
// tool's result is in. It counts its calls by run (named in the system
// prompt) and step (one more than the assistant messages so far).
func (h *harness) answer(_ context.Context, req *model.Request) (*model.Response, error) {
	run, step := "", 1
	for _, m := range req.Messages {
		switch m.Role {
		case model.RoleSystem:
			if _, after, ok := strings.Cut(m.Text(), runMarker); ok {
				run = after
			}
		case model.RoleAssistant:
			step++
		}
	}
	h.mu.Lock()
	if h.calls[run] == nil {
		h.calls[run] = map[int]int{}
	}
	h.calls[run][step]++
	h.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return modeltest.Text("The sum is " + last.Text()), nil
	}
	return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
}

// modelCalls returns the model calls of run by step.
func (h *harness) modelCalls(run string) map[int]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int]int{}
	for s, n := range h.calls[run] {
		out[s] = n
	}
	return out
}

// config returns the configuration of this test's workers on b.
func (h *harness) config(b backend) *workerConfig {
	cfg := &workerConfig{
		Namespace: calf.NewID()[:12],
		ModelURL:  h.model.URL(),
		Agent:     "calc_" + calf.NewID()[:8],
		CrashDir:  h.t.TempDir(),
	}
	b.setup(h.t, cfg)
	return cfg
}

// start starts a worker process with cfg.
func (h *harness) start(cfg *workerConfig) *proc {
	h.t.Helper()
	p := &proc{}
	tp, err := testproc.Start(workerEnv, cfg, &testproc.Options{
		Stdout: func(line []byte) {
			var ev event
			if err := json.Unmarshal(line, &ev); err != nil {
				p.log(append([]byte("[stdout] "), line...))
				return
			}
			h.mu.Lock()
			h.events = append(h.events, ev)
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		},
		Stderr: p.log,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	p.Process, p.pid = tp, tp.PID
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p
}

// waitEvent waits for an event that matches ok, among those reported so
// far and those to come.
func (h *harness) waitEvent(what string, ok func(event) bool) event {
	h.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for i := 0; ; {
		h.mu.Lock()
		for ; i < len(h.events); i++ {
			if ok(h.events[i]) {
				ev := h.events[i]
				h.mu.Unlock()
				return ev
			}
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			h.t.Fatalf("no %s within %s", what, waitTimeout)
		}
	}
}

// ready waits until p serves. A worker that does not is made to write
// its goroutines on its standard error (SIGQUIT), which the test logs.
func (h *harness) ready(p *proc) {
	h.t.Helper()
	ok := make(chan struct{})
	defer close(ok)
	go func() {
		select {
		case <-ok:
		case <-time.After(waitTimeout - 5*time.Second):
			_ = p.Cmd.Process.Signal(syscall.SIGQUIT)
		}
	}()
	h.waitEvent(fmt.Sprintf("ready from worker %d", p.pid), func(ev event) bool { return ev.Ev == "ready" && ev.PID == p.pid })
}

// waitExit waits until p has exited.
func (h *harness) waitExit(p *proc) {
	h.t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(waitTimeout):
		h.t.Fatalf("worker %d did not exit", p.pid)
	}
}

// stopAll asks every worker to stop (by closing its standard input), kills
// those that do not, and waits until all their output is read. On failure
// it logs their standard error.
func (h *harness) stopAll() {
	h.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.mu.Unlock()
	for _, p := range procs {
		_ = p.CloseStdin()
	}
	for _, p := range procs {
		p.Stop(20 * time.Second)
		if h.t.Failed() {
			p.mu.Lock()
			if p.stderr.Len() > 0 {
				h.t.Logf("worker %d stderr:\n%s", p.pid, p.stderr.String())
			}
			p.mu.Unlock()
		}
	}
}

// count returns how many events of kind ev the workers reported for run.
func (h *harness) count(ev, run string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e.Ev == ev && e.Run == run {
			n++
		}
	}
	return n
}

// eventsOf returns the events of kind ev for run.
func (h *harness) eventsOf(ev, run string) []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []event
	for _, e := range h.events {
		if e.Ev == ev && e.Run == run {
			out = append(out, e)
		}
	}
	return out
}

// caller is the caller's side in the test process: a runtime on the
// workers' broker and store, serving nothing.
type caller struct {
	rt    *agent.Runtime
	agent *agent.Agent[string]
	store store.Store

	mu      sync.Mutex
	outputs map[string][]agent.OutputEvent // on the agent's output channel, by run
	runs    []string                       // started by run
}

func newCaller(t *testing.T, cfg *workerConfig) *caller {
	t.Helper()
	b, err := openBroker(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t.Context(), cfg)
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	client := calf.NewClient(b, nil)
	t.Cleanup(func() {
		_ = client.Close()
		_ = b.Close()
		_ = st.Close()
	})
	a, err := newAgent(cfg.Agent, cfg.ModelURL, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{rt: agent.NewRuntime(client, st, nil), agent: a, store: st, outputs: map[string][]agent.OutputEvent{}}
	// Leave nothing behind in the shared store: the records of the runs.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range c.runs {
			_ = st.Delete(ctx, store.KindRun, id, 0)
			_ = st.Delete(ctx, store.KindToolResult, id+"/call_1", 0)
		}
	})
	// Count every output published on the agent's output channel.
	if err := client.Handle(t.Context(), agent.OutputChannel(cfg.Agent), func(_ context.Context, m *calf.Message) error {
		var ev agent.OutputEvent
		if err := m.Decode(&ev); err != nil {
			return calf.Permanent(err)
		}
		c.mu.Lock()
		c.outputs[m.Metadata.RunID] = append(c.outputs[m.Metadata.RunID], ev)
		c.mu.Unlock()
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// run starts a run in the background; its result comes on the channel.
func (c *caller) run(t *testing.T, id string) <-chan runResult {
	ch := make(chan runResult, 1)
	c.mu.Lock()
	c.runs = append(c.runs, id)
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		out, err := c.agent.Run(ctx, c.rt, prompt, &agent.RunOptions{RunID: id})
		ch <- runResult{out, err}
	}()
	return ch
}

type runResult struct {
	out *agent.Output[string]
	err error
}

// checkW1 reports a result that is not W1's: the sum, after one call of
// add and two model calls.
func checkW1(t *testing.T, id string, r runResult) {
	t.Helper()
	if r.err != nil {
		t.Errorf("run %s: %v", id, r.err)
		return
	}
	o := r.out
	if o.Output != wantOutput || o.Steps != 2 || len(o.ToolCalls) != 1 || o.ToolCalls[0].Result == nil || o.ToolCalls[0].Result.Text() != "5" {
		t.Errorf("run %s: output %q after %d steps and %d tool calls; want %q, 2 steps, one call of add that returned 5",
			id, o.Output, o.Steps, len(o.ToolCalls), wantOutput)
	}
}

// outputsOf returns the outputs seen on the agent's output channel for run.
func (c *caller) outputsOf(run string) []agent.OutputEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]agent.OutputEvent(nil), c.outputs[run]...)
}

// await waits for a run's result.
func await(t *testing.T, id string, ch <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout + 5*time.Second):
		t.Fatalf("run %s did not return", id)
		return runResult{}
	}
}
