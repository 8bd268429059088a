package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/timers"
)

// nodeWaits is what one run of a node needs to wait for signals: the
// runtime, and the count of its waits (each numbered, so that the node,
// run again, finds its earlier waits answered).
type nodeWaits struct {
	rt  *agent.Runtime
	st  *runState
	key string // the message key of the node's step events
	n   int
	// waiting is the signal the node stopped for, and until when.
	waiting string
	until   time.Time
}

// signalKey names a workflow run among the runs whose signals are kept.
func signalKey(workflow, run string) string { return "workflow/" + workflow + "/" + run }

// signalEnv is what a wait needs of rt.
func signalEnv(rt *agent.Runtime) signals.Env {
	return signals.Env{
		Store: rt.Store(), Client: rt.Client(), Now: rt.Client().Now,
		StartTimer: func(ctx context.Context, t timers.Timer) (bool, error) { return rt.StartTimer(ctx, agent.Timer(t)) },
		StopTimer:  rt.StopTimer,
		Local:      calf.IsLocal(rt.Client().Broker()),
	}
}

// WaitSignal waits, in a function node, for the signal name sent to the
// node's run ([agent.Runtime.Signal] with a RunRef of kind "workflow",
// calf runs signal, POST /v1/runs/{id}/signals/{name}) for at most
// timeout (0: no limit), and decodes its value into v (unless v is nil).
// It reports true when a signal came, false when the wait timed out.
//
// When no signal of the name is there yet, WaitSignal returns an error,
// which the node returns as it is: the run then waits, holding no
// goroutine and no message ([RunInfo.WaitingFor] names the signal), and
// when the signal arrives, or the timeout passes, the node runs again
// from its start on whichever process serves the workflow, where its
// earlier waits return what they returned and this one the signal. So a
// node waits in the same order each time it runs, and does what it must
// do once after its waits (or in a node of its own). A signal sent
// before the run waits is kept, and taken by the first wait for its
// name; each signal is taken by one wait, in the order sent.
//
//	var ok bool
//	var verdict string
//	if ok, err = workflow.WaitSignal(ctx, "review", 24*time.Hour, &verdict); err != nil {
//		return s, err
//	}
//	if !ok {
//		verdict = "no review in a day"
//	}
func WaitSignal(ctx context.Context, name string, timeout time.Duration, v any) (bool, error) {
	info, ok := Info(ctx)
	if !ok || info.waits == nil {
		return false, errors.New("workflow: WaitSignal outside a function node")
	}
	nw := info.waits
	nw.n++
	ev, err := json.Marshal(StepEvent{Step: info.Step, Node: info.Node})
	if err != nil {
		return false, err
	}
	w := &signals.Wait{
		Key: signalKey(info.Workflow, info.RunID), Call: strconv.Itoa(info.Step) + "/" + info.Node + "/" + strconv.Itoa(nw.n),
		Name: name, Timeout: timeout,
		Wake: signals.Wake{Channel: StepChannel(info.Workflow), Data: ev, Key: nw.key,
			EventID:  stepID(info.RunID, info.Step, info.Node) + ".wait." + strconv.Itoa(nw.n),
			Metadata: calf.Metadata{CorrelationID: info.RunID, RunID: info.RunID}},
	}
	env := signalEnv(nw.rt)
	sig, timedOut, err := w.Do(ctx, env)
	if errors.Is(err, signals.ErrWaiting) {
		nw.waiting = name
		if timeout > 0 {
			nw.until = env.Now().Add(timeout)
		}
		return false, &waitError{name: name}
	}
	if err != nil {
		return false, fmt.Errorf("workflow: node %q: %w", info.Node, err)
	}
	if timedOut {
		return false, nil
	}
	if v != nil && len(sig.Value) > 0 {
		if err := json.Unmarshal(sig.Value, v); err != nil {
			return true, fmt.Errorf("workflow: node %q: decode signal %s: %w", info.Node, name, err)
		}
	}
	return true, nil
}

// waitError is what WaitSignal returns for the node to return: the run
// waits for the signal.
type waitError struct{ name string }

func (e *waitError) Error() string { return "workflow: waiting for signal " + e.name }

// waitFor records that the run's current step waits for the signal
// name of node (until until, when set).
func (h *handlers[S]) waitFor(ctx context.Context, st *runState, node string, nw *nodeWaits) error {
	step := st.Step
	_, _, err := h.commit(ctx, st.RunID, func(st *runState) bool {
		if !st.pending(step, node) || (st.WaitingFor == nw.waiting && st.WaitStep == step) {
			return false
		}
		st.WaitingFor, st.WaitStep, st.WaitUntil = nw.waiting, step, nw.until.UTC()
		return true
	})
	return err
}

// signalRun sends a signal to the run runID of the workflow named
// workflow, which must not have ended.
func signalRun(ctx context.Context, rt *agent.Runtime, workflow, runID, name string, value json.RawMessage) (*RunInfo, error) {
	if rt == nil {
		return nil, fmt.Errorf("workflow %s: signal run %s: %w", workflow, runID, agent.ErrNoRuntime)
	}
	info, err := loadRun(ctx, rt, workflow, runID)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: signal run %s: %w", workflow, runID, err)
	}
	if info.Status.Terminal() {
		return info, fmt.Errorf("workflow %s: signal %s to run %s: %w with status %s", workflow, name, runID, agent.ErrRunEnded, info.Status)
	}
	if _, err := signals.Deliver(ctx, signalEnv(rt), signalKey(workflow, runID), name, value); err != nil {
		return info, fmt.Errorf("workflow %s: signal %s to run %s: %w", workflow, name, runID, err)
	}
	return info, nil
}

// interruptSignal names the signal that answers a run's interrupt n
// ([Workflow.Answer] sends it).
func interruptSignal(n int) string { return "calf.interrupt." + strconv.Itoa(n) }

// awaitAnswer has the run wait for the answer to its interrupt n, the
// signal interruptSignal(n) ([signals.Await]), whose wake is the resume
// event, with the id that Answer and recovery give it. Registered again,
// it changes nothing; an answer sent before is woken at once.
func (h *handlers[S]) awaitAnswer(ctx context.Context, run string, n int) error {
	data, err := json.Marshal(ResumeEvent{Interrupt: n})
	if err != nil {
		return err
	}
	err = signals.Await(ctx, signalEnv(h.rt), signalKey(h.w.name, run), interruptSignal(n), signals.Wake{
		Channel: ResumeChannel(h.w.name), Data: data, Key: run, EventID: resumeID(run, n),
		Metadata: calf.Metadata{CorrelationID: run, RunID: run}, Once: true,
	})
	if err != nil {
		return fmt.Errorf("workflow %s: run %s: interrupt %d: %w", h.w.name, run, n, err)
	}
	return nil
}
