package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testproc"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// harness runs worker processes against a fake model server in this
// process, and collects what they and the model see.
type harness struct {
	t      *testing.T
	model  *modeltest.Server
	delay  time.Duration // the model's latency
	cfg    workerConfig
	logDir string

	mu      sync.Mutex
	calls   map[string]map[int][]int64 // model calls' times by run and step
	tools   map[string][]int64         // add's executions' times by run
	handles []event                    // handlers started, in the order read
	logs    logTally
	workers []*worker
}

// worker is a worker process.
type worker struct {
	*testproc.Process
	ready chan struct{} // closed when it serves
}

func newHarness(t *testing.T, delay time.Duration) *harness {
	logDir := os.Getenv("CALF_CHAOS_LOGS")
	if logDir == "" {
		logDir = t.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, delay: delay, logDir: logDir,
		calls: map[string]map[int][]int64{}, tools: map[string][]int64{},
		logs: logTally{parked: map[parkedKey]int{}, messages: map[string]int{}},
	}
	h.model = modeltest.NewServer(h.answer)
	t.Cleanup(h.model.Close)
	t.Cleanup(h.stopWorkers)
	return h
}

// answer is W1's model: a call of add(2, 3) first, then the sum once the
// tool's result is in. It records its calls by run (named in the system
// prompt) and step (one more than the assistant messages so far).
func (h *harness) answer(ctx context.Context, req *model.Request) (*model.Response, error) {
	now := time.Now().UnixNano()
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
		h.calls[run] = map[int][]int64{}
	}
	h.calls[run][step] = append(h.calls[run][step], now)
	h.mu.Unlock()
	sleep(ctx, h.delay)
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return modeltest.Text("The sum is " + last.Text()), nil
	}
	return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
}

// startWorker starts a worker process; it does not wait until it serves.
func (h *harness) startWorker() (*worker, error) {
	w := &worker{ready: make(chan struct{})}
	// The log is named after the process once it has started.
	logf, err := os.CreateTemp(h.logDir, "worker-*.log")
	if err != nil {
		return nil, err
	}
	p, err := testproc.Start(workerEnv, h.cfg, &testproc.Options{
		Stdout: func(line []byte) { h.readEvent(w, line) },
		Stderr: func(line []byte) {
			_, _ = logf.Write(append(line[:len(line):len(line)], '\n'))
			h.mu.Lock()
			h.logs.add(line)
			h.mu.Unlock()
		},
	})
	if err != nil {
		_ = logf.Close()
		_ = os.Remove(logf.Name())
		return nil, err
	}
	w.Process = p
	if err := os.Rename(logf.Name(), filepath.Join(h.logDir, fmt.Sprintf("worker-%d.log", p.PID))); err != nil {
		p.Stop(0)
		return nil, err
	}
	go func() {
		<-p.Exited()
		_ = logf.Close()
	}()
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
	return w, nil
}

// readEvent reads a line of a worker's events.
func (h *harness) readEvent(w *worker, line []byte) {
	var ev event
	if json.Unmarshal(line, &ev) != nil {
		return
	}
	switch ev.Ev {
	case "ready":
		close(w.ready)
	case "tool":
		h.mu.Lock()
		h.tools[ev.Run] = append(h.tools[ev.Run], ev.T)
		h.mu.Unlock()
	case "handle":
		h.mu.Lock()
		h.handles = append(h.handles, ev)
		h.mu.Unlock()
	}
}

// logWriter tallies what a logger in this process writes.
type logWriter struct{ h *harness }

func (w logWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	for line := range strings.SplitSeq(strings.TrimSpace(string(p)), "\n") {
		w.h.logs.add([]byte(line))
	}
	return len(p), nil
}

// waitReady waits until w serves.
func (h *harness) waitReady(w *worker) error {
	select {
	case <-w.ready:
		return nil
	case <-w.Exited():
		return fmt.Errorf("worker %d exited before it served (see %s)", w.PID, h.logDir)
	case <-time.After(2 * serviceTimeout):
		return fmt.Errorf("worker %d does not serve", w.PID)
	}
}

// killWorker kills the oldest worker with SIGKILL and starts another in
// its place at once.
func (h *harness) killWorker() (int, error) {
	h.mu.Lock()
	if len(h.workers) == 0 {
		h.mu.Unlock()
		return 0, errors.New("no worker")
	}
	w := h.workers[0]
	h.workers = h.workers[1:]
	h.mu.Unlock()
	err := w.Kill()
	_, serr := h.startWorker()
	<-w.Exited()
	return w.PID, errors.Join(err, serr)
}

// stopWorkers asks every worker to stop (by closing its standard input),
// and kills those that do not within the drain.
func (h *harness) stopWorkers() {
	h.mu.Lock()
	ws := h.workers
	h.workers = nil
	h.mu.Unlock()
	for _, w := range ws {
		_ = w.CloseStdin()
	}
	for _, w := range ws {
		w.Stop(40 * time.Second)
	}
}

// parkedKey identifies a parked message: its id and the consumer group
// that failed it.
type parkedKey struct{ id, group string }

// logTally counts the lines of the processes' diagnostics.
type logTally struct {
	// parked are the messages the brokers said they parked, with the
	// times they said so.
	parked map[parkedKey]int
	// dropped counts the dead letters the brokers said they dropped;
	// unparked the messages they could not park (they stay in the
	// broker, to be delivered again).
	dropped, unparked int
	// messages counts the lines by message, for the report.
	messages map[string]int
	// runOf maps a parked message to its run.
	runOf map[parkedKey]string
}

func (l *logTally) add(line []byte) {
	var rec struct {
		Msg   string `json:"msg"`
		ID    string `json:"id"`
		Group string `json:"group"`
		Key   string `json:"key"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg == "" {
		return
	}
	l.messages[rec.Msg]++
	switch {
	case strings.Contains(rec.Msg, "parked message"):
		k := parkedKey{rec.ID, rec.Group}
		l.parked[k]++
		if l.runOf == nil {
			l.runOf = map[parkedKey]string{}
		}
		l.runOf[k] = rec.Key
	case strings.Contains(rec.Msg, "dropped a dead letter"):
		l.dropped++
	case strings.Contains(rec.Msg, "could not park"):
		l.unparked++
	}
}

// runOutcome is what a caller got for a run.
type runOutcome struct {
	ID         string
	Start, End time.Time
	// Kind is "ok" (the correct output), or the kind of what went wrong
	// (see classify).
	Kind string
	Err  string
}

// classify names the kind of a caller's error.
func classify(err error, out *agent.Output[string]) string {
	switch {
	case err == nil:
		if out.Output != wantOutput || out.Steps != 2 || len(out.ToolCalls) != 1 || out.ToolCalls[0].Result == nil || out.ToolCalls[0].Result.Text() != "5" {
			return "wrong output"
		}
		return "ok"
	case errors.Is(err, agent.ErrRunParked):
		return "parked"
	case errors.Is(err, agent.ErrNotServed):
		return "not served"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, agent.ErrRunCancelled):
		return "cancelled"
	case errors.Is(err, agent.ErrRunFailed):
		return "failed"
	case errors.Is(err, calf.ErrClosed):
		return "closed"
	}
	return "infrastructure"
}

// caller is the callers' side in the test process: a runtime on the
// workers' broker and store, serving nothing.
type caller struct {
	rt    *agent.Runtime
	b     calf.Broker
	agent *agent.Agent[string]

	mu       sync.Mutex
	outcomes []runOutcome
	inflight map[string]time.Time // runs whose Run has not returned, by start
	// outputs counts the completed outputs published on the agent's
	// output channel, by run.
	outputs map[string]int
	// repeats counts, of the outputs delivered more than once, those that
	// came again with the id of the first (redeliveries) and, of these,
	// those whose delivery attempt said so (above 1): the broker's
	// at-least-once delivery after a lost acknowledgement.
	repeats, repeatAttempts int
	outputIDs               map[string]string // the first output id, by run
}

// countOutputs subscribes c to the agent's output channel.
func (c *caller) countOutputs(ctx context.Context, client *calf.Client) error {
	return client.Handle(ctx, agent.OutputChannel(c.agent.Name()), func(_ context.Context, m *calf.Message) error {
		var ev agent.OutputEvent
		if err := m.Decode(&ev); err != nil {
			return calf.Permanent(err)
		}
		if ev.Status == agent.OutputComplete {
			c.mu.Lock()
			run := m.Metadata.RunID
			c.outputs[run]++
			if first, ok := c.outputIDs[run]; !ok {
				c.outputIDs[run] = m.ID
			} else if first == m.ID {
				c.repeats++
				if m.Metadata.Attempt > 1 {
					c.repeatAttempts++
				}
			}
			c.mu.Unlock()
		}
		return nil
	}, nil)
}

// load runs callers concurrent callers, each running W1 runs one after the
// other until end; each Run may last until bound. It returns when every
// caller has returned, or at bound plus stuckAfter, leaving those that
// have not (they are reported as in flight).
func (c *caller) load(callers int, end, bound time.Time, stuckAfter time.Duration) {
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Now().Before(end) {
				id := "run-" + calf.NewID()
				start := time.Now()
				c.mu.Lock()
				c.inflight[id] = start
				c.mu.Unlock()
				ctx, cancel := context.WithDeadline(context.Background(), bound)
				out, err := c.agent.Run(ctx, c.rt, prompt, &agent.RunOptions{RunID: id})
				cancel()
				o := runOutcome{ID: id, Start: start, End: time.Now(), Kind: classify(err, out)}
				if err != nil {
					o.Err = err.Error()
				}
				c.mu.Lock()
				delete(c.inflight, id)
				c.outcomes = append(c.outcomes, o)
				c.mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Until(bound) + stuckAfter):
	}
}
