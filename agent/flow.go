package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/store"
)

// FlowControl holds the runs of an agent, a team or a workflow to limits
// per key, enforced across every process that serves it: runs over a
// limit wait, as records in the store (no goroutine, no message in
// flight), in order, and start when room frees up, in whichever process
// serves the runner then. A run's key is computed from its input (a
// tenant, a user, a conversation); all runs share one key when Key is
// nil.
//
// A slot belongs to a run, not to a process: a process killed while one
// of its runs holds a slot leaves the run to the process that takes it
// over (the broker delivers its events again), and the slot is freed
// when the run ends, at most [RuntimeOptions.FlowPoll] later. A run that
// waits is shown by [Runtime.Flow]; a caller's wait for it ([Agent.Wait],
// Run) waits through the queue.
type FlowControl struct {
	// Key computes a run's key. Nil, or an empty key, puts every run
	// under one key. Keys longer than 128 bytes (once path-escaped) are
	// hashed.
	Key func(FlowInput) string
	// Concurrency bounds the runs of one key in progress at once; 0: no
	// bound.
	Concurrency int
	// Rate runs of one key start per Per at most, evenly spaced (the
	// generic cell rate algorithm), Burst more at once after a quiet
	// spell; 0: no bound.
	Rate  int
	Per   time.Duration
	Burst int
	// Debounce, when set, makes a burst of inputs of one key, each within
	// Debounce of the one before, start one run, the last input's, once
	// Debounce has passed since it came. The runs of the inputs it
	// replaced end cancelled, their error naming the run that replaced
	// them. It applies before Concurrency and Rate.
	Debounce time.Duration
	// Priority ranks the waiting runs: higher first (0 to 9999), then in
	// the order they came; within a key, and across keys when MaxRunning
	// is reached. Nil: all 0.
	Priority func(FlowInput) int
	// MaxRunning bounds the runs in progress across all keys at once; 0:
	// no bound. When it is reached, the waiting runs of every key start
	// by priority as slots free up (a run whose key is full is passed
	// over for the next).
	MaxRunning int
}

// FlowInput is what a run's key and priority are computed from.
type FlowInput struct {
	// Kind and Name name the runner: "agent", "team" or "workflow".
	Kind, Name string
	// RunID and SessionID are the run's (SessionID empty without a
	// session).
	RunID, SessionID string
	// Prompt is the run's prompt (an agent's, a team's).
	Prompt string
	// Input is the JSON of the run's input event: for a workflow, its
	// state is its "state" field.
	Input []byte
}

// FlowStats is what [Runtime.Flow] reports of one key.
type FlowStats struct {
	// Running counts the runs that hold a slot; Waiting those that wait.
	Running, Waiting int
}

func (fc *FlowControl) policy() flow.Policy {
	p := flow.Policy{Concurrency: fc.Concurrency, Rate: fc.Rate, Per: fc.Per, Burst: fc.Burst, Debounce: fc.Debounce, MaxRunning: fc.MaxRunning}
	if k := fc.Key; k != nil {
		p.Key = func(in flow.Input) string { return k(flowInput(in)) }
	}
	if pr := fc.Priority; pr != nil {
		p.Priority = func(in flow.Input) int { return pr(flowInput(in)) }
	}
	return p
}

func flowInput(in flow.Input) FlowInput {
	return FlowInput{Kind: in.Kind, Name: in.Name, RunID: in.RunID, SessionID: in.SessionID, Prompt: in.Prompt, Input: in.Data}
}

// Check reports what is wrong with fc: negative bounds, a rate without
// its period.
func (fc *FlowControl) Check() error {
	if fc == nil {
		return nil
	}
	return fc.policy().Check()
}

// FlowGate returns the input handler of a runner held to fc: it stands
// in front of inner, the runner's own input handler, and starts, until
// the runtime's client shuts down, the loop that gives freed slots to
// waiting runs.
// prompt gives a run's prompt from its input message (nil: none). It is
// for the packages of runners (team, workflow); an agent's Options.Flow
// does the same for an agent.
func (rt *Runtime) FlowGate(ctx context.Context, kind, name string, fc *FlowControl, inner calf.Handler, prompt func(*calf.Message) string) (calf.Handler, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if fc == nil {
		return inner, nil
	}
	g, err := rt.flowGate(kind, name, fc, inner, prompt)
	if err != nil {
		return nil, err
	}
	// The loop lives as long as the runtime's client, as the handlers
	// do, not as the caller's ctx.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rt.client.OnShutdown(cancel)
	g.Serve(lctx)
	return g.Handle, nil
}

func (rt *Runtime) flowGate(kind, name string, fc *FlowControl, inner calf.Handler, prompt func(*calf.Message) string) (*flow.Gate, error) {
	env := flow.Env{
		Store: rt.store, Now: rt.now, Log: rt.log, Poll: rt.flowPoll,
		State: func(ctx context.Context, runID string) (bool, bool, error) {
			// Whether the run has started: a queued run has not.
			v, err := rt.loadRecorded(ctx, RunRef{Kind: kind, Name: name, RunID: runID})
			if errors.Is(err, store.ErrNotFound) {
				return false, false, nil
			}
			if err != nil {
				return false, false, err
			}
			return true, v.RunStatus().Terminal(), nil
		},
		Cancel: func(ctx context.Context, runID, reason string) error {
			_, err := rt.Cancel(ctx, RunRef{Kind: kind, Name: name, RunID: runID}, reason)
			if errors.Is(err, ErrRunEnded) {
				return nil
			}
			return err
		},
	}
	decode := func(m *calf.Message) (flow.Input, error) {
		in := flow.Input{Kind: kind, Name: name, RunID: m.Metadata.RunID, SessionID: m.Metadata.SessionID, Data: m.Data}
		if prompt != nil {
			in.Prompt = prompt(m)
		}
		return in, nil
	}
	g, err := flow.New(kind, name, fc.policy(), env, inner, decode)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	if rt.gates == nil {
		rt.gates = map[string]*flow.Gate{}
	}
	rt.gates[g.Target()] = g
	rt.mu.Unlock()
	return g, nil
}

// Flow reports the runs of the runner that ref names (its Kind and Name)
// under the key that in gives (the runner's FlowControl.Key computes it),
// holding a slot and waiting for one. The runner must be served on this
// runtime with flow control.
func (rt *Runtime) Flow(ctx context.Context, ref RunRef, in FlowInput) (FlowStats, error) {
	if rt == nil {
		return FlowStats{}, ErrNoRuntime
	}
	kind := ref.Kind
	if kind == "" {
		kind = "agent"
	}
	rt.mu.Lock()
	g := rt.gates[kind+"/"+ref.Name]
	rt.mu.Unlock()
	if g == nil {
		return FlowStats{}, fmt.Errorf("agent: flow of %s %s: not served with flow control on this runtime", kind, ref.Name)
	}
	s, err := g.Stats(ctx, flow.Input{Kind: kind, Name: ref.Name, RunID: in.RunID, SessionID: in.SessionID, Prompt: in.Prompt, Data: in.Input})
	return FlowStats{Running: s.Running, Waiting: s.Waiting}, err
}

// flowQueued reports whether runID waits for a slot.
func (rt *Runtime) flowQueued(ctx context.Context, runID string) (bool, error) {
	return flow.Queued(ctx, rt.store, runID)
}

// QueuedRun is the view of a run that waits under flow control
// ([FlowControl]) before it starts: for a slot of its key, or in a
// debounce window. Such a run has no record of its own yet, only its
// input held in the store; [Runtime.LoadRun] gives this view of it, and
// the run's own view once it starts.
type QueuedRun struct {
	Run RunRef `json:"run"`
	// Key is the run's flow key, as stored: path-escaped ("-" for none,
	// "sha256-..." for a long one).
	Key string `json:"key"`
	// Status is [RunQueued].
	Status RunStatus `json:"status"`
}

// Ref names the run.
func (q *QueuedRun) Ref() RunRef { return q.Run }

// RunStatus is [RunQueued].
func (q *QueuedRun) RunStatus() RunStatus { return RunQueued }

// LoadQueuedRun returns the view of the run runID, of any kind, while it
// waits under flow control before it starts, or an error matching
// [store.ErrNotFound] when it does not (it has started, ended, or is
// unknown).
func LoadQueuedRun(ctx context.Context, s store.Store, runID string) (*QueuedRun, error) {
	target, key, ok, err := flow.Lookup(ctx, s, runID)
	if err != nil {
		return nil, fmt.Errorf("agent: run %s: %w", runID, err)
	}
	if !ok {
		return nil, fmt.Errorf("agent: run %s is not queued: %w", runID, store.ErrNotFound)
	}
	kind, name, _ := strings.Cut(target, "/")
	return &QueuedRun{Run: RunRef{Kind: kind, Name: name, RunID: runID}, Key: key, Status: RunQueued}, nil
}

// queuedView returns the view of run while it waits under flow control,
// when the load of its record found none: err itself otherwise.
func (rt *Runtime) queuedView(ctx context.Context, run RunRef, err error) (RunView, error) {
	if !errors.Is(err, store.ErrNotFound) || run.RunID == "" {
		return nil, err
	}
	q, qerr := LoadQueuedRun(ctx, rt.store, run.RunID)
	if qerr != nil {
		if errors.Is(qerr, store.ErrNotFound) {
			return nil, err
		}
		return nil, qerr
	}
	if q.Run.Kind != run.kind() || (run.Name != "" && q.Run.Name != run.Name) {
		return nil, err // another runner's run of that id
	}
	return q, nil
}
