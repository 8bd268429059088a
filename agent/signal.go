package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/internal/idem"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/timers"
	"github.com/calf-go/calf/store"
)

// Signal sends the signal name, with value as its JSON (a
// json.RawMessage is sent as it is; nil sends none), to the run that run
// names, of any kind: an agent's run, whose custom step waits for it
// with [StepContext.WaitSignal]; a workflow's, whose function nodes wait
// with workflow.WaitSignal; a team's, whose member runs in progress each
// get it. A signal sent before the run waits for it is kept, and taken by
// the run's first wait for its name; signals of one name are taken in
// the order sent, each once. Signal returns the run as it stands. A run
// that has ended returns an error matching [ErrRunEnded]; an unknown run
// one matching [store.ErrNotFound]; a name that is not 1 to 128 letters,
// digits, '_', '-', '.' or ':' is an error. [Runtime.SignalWith] sends
// a signal under the caller's idempotency key.
func (rt *Runtime) Signal(ctx context.Context, run RunRef, name string, value any) (RunView, error) {
	return rt.SignalWith(ctx, run, name, value, nil)
}

// SignalOptions configure [Runtime.SignalWith]. A nil *SignalOptions
// means the defaults.
type SignalOptions struct {
	// IdempotencyKey, when set, is the caller's key for this signal: the
	// same signal (name and value) under the same key to the same run,
	// within the runtime's [RuntimeOptions.IdempotencyWindow] (from any
	// process, after restarts), is delivered once, and sent again answers
	// as the first did (a run that has ended since is no error); another
	// signal under a key in use for the run is refused with an error
	// matching [ErrIdempotencyConflict]. The key is the run's: another
	// run's signals do not share it. A signal refused by its run (an
	// unknown run, one that had ended) leaves its key unused. Default:
	// none, each call sends a signal.
	IdempotencyKey string
}

// SignalWith is [Runtime.Signal] with options: under
// [SignalOptions.IdempotencyKey], the same signal sent again is
// delivered once.
func (rt *Runtime) SignalWith(ctx context.Context, run RunRef, name string, value any, opts *SignalOptions) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if err := signals.CheckSent(name); err != nil {
		return nil, fmt.Errorf("agent: signal run %s: %w", run.RunID, err)
	}
	var raw json.RawMessage
	switch v := value.(type) {
	case nil:
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, fmt.Errorf("agent: signal %s to run %s: the value is not JSON", name, run.RunID)
		}
		raw = v
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("agent: signal %s to run %s: encode the value: %w", name, run.RunID, err)
		}
		raw = data
	}
	if len(raw) > signalMaxValue {
		return nil, fmt.Errorf("agent: signal %s to run %s: the value has %d bytes, over the limit of %d", name, run.RunID, len(raw), signalMaxValue)
	}
	if opts == nil || opts.IdempotencyKey == "" {
		return rt.signal(ctx, run, name, raw)
	}
	return rt.signalOnce(ctx, run, name, raw, opts.IdempotencyKey)
}

// signalOnce sends a signal under the caller's key: the key names the
// position of the signal its first request sent ([signals.WithSeq]), so
// that the same signal sent again is the one recorded, delivered once.
func (rt *Runtime) signalOnce(ctx context.Context, run RunRef, name string, raw json.RawMessage, key string) (RunView, error) {
	scope := "signal/" + run.kind() + "/" + run.RunID
	req, err := json.Marshal(struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value,omitempty"`
	}{name, raw})
	if err != nil {
		return nil, err
	}
	fresh := signals.NewSeq(rt.now())
	seq, err := idem.Claim(ctx, rt.store, scope, key, idem.Digest(req), fresh, rt.now(), rt.idemWindow)
	if err != nil {
		return nil, fmt.Errorf("agent: signal %s to run %s: %w", name, run.RunID, err)
	}
	v, err := rt.signal(signals.WithSeq(ctx, seq), run, name, raw)
	switch {
	case err == nil:
		return v, nil
	case seq == fresh && (errors.Is(err, ErrRunEnded) || errors.Is(err, store.ErrNotFound)):
		// Refused by the run, nothing delivered: the key is free. (After
		// another error, such as an outage, the key keeps the signal's
		// position: sent again, it is delivered once.)
		if rerr := idem.Release(context.WithoutCancel(ctx), rt.store, scope, key, seq); rerr != nil {
			return v, errors.Join(err, rerr)
		}
	case errors.Is(err, ErrRunEnded) && v != nil:
		// Delivered by the first request, before the run ended.
		return v, nil
	}
	return v, err
}

// signal sends the signal of JSON raw to run.
func (rt *Runtime) signal(ctx context.Context, run RunRef, name string, raw json.RawMessage) (RunView, error) {
	var v RunView
	k, err := rt.runKind(run, "signal")
	switch {
	case err != nil:
		return nil, err
	case k != nil:
		v, err = k.Signal(ctx, rt, run, name, raw)
	default:
		v, err = agentView(rt.signalAgentRun(ctx, run, name, raw))
	}
	if errors.Is(err, store.ErrNotFound) {
		return rt.signalQueued(ctx, run, name, raw, err)
	}
	return v, err
}

// signalQueued keeps the signal sent to run, an agent's or a workflow's,
// while it waits under flow control before it starts (its first wait
// for the name takes it), and returns its view; notFound, the error of
// the run's kind, when it is not queued. A team's run has no member run
// to take it until it starts: notFound is returned, with what to do.
func (rt *Runtime) signalQueued(ctx context.Context, run RunRef, name string, raw json.RawMessage, notFound error) (RunView, error) {
	v, err := rt.queuedView(ctx, run, notFound)
	if err != nil {
		return nil, err
	}
	q := v.(*QueuedRun)
	if q.Run.Kind == "team" {
		return q, fmt.Errorf("team %s: signal %s to run %s: the run waits under flow control, and has no member run to take a signal yet: send it once it has started", q.Run.Name, name, q.Run.RunID)
	}
	if _, err := signals.Deliver(ctx, rt.signalEnv(), runSignalKey(q.Run.Kind, q.Run.Name, q.Run.RunID), name, raw); err != nil {
		return q, fmt.Errorf("%s %s: signal %s to run %s: %w", q.Run.Kind, q.Run.Name, name, q.Run.RunID, err)
	}
	return q, nil
}

// signalMaxValue bounds the JSON of a signal's value.
const signalMaxValue = 256 << 10

func (rt *Runtime) signalAgentRun(ctx context.Context, run RunRef, name string, value json.RawMessage) (*RunInfo, error) {
	if err := run.agentRef("signal"); err != nil {
		return nil, err
	}
	st, err := rt.lastOfChain(ctx, run.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent %s: signal %s: no run %s: %w", run.Name, name, run.RunID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: signal %s to run %s: %w", run.Name, name, run.RunID, err)
	}
	if st.Status.Terminal() {
		info, _ := st.info()
		return info, fmt.Errorf("agent %s: signal %s to run %s: %w with status %s", run.Name, name, run.RunID, ErrRunEnded, st.Status)
	}
	if _, err := signals.Deliver(ctx, rt.signalEnv(), agentSignalKey(st.Agent, st.RunID), name, value); err != nil {
		return nil, fmt.Errorf("agent %s: signal %s to run %s: %w", run.Name, name, run.RunID, err)
	}
	return st.info()
}

// agentSignalKey names an agent's run among the runs whose signals are
// kept.
func agentSignalKey(agent, run string) string { return runSignalKey("agent", agent, run) }

// runSignalKey names the run of a kind's runner among the runs whose
// signals are kept: "{kind}/{runner}/{run}" (a workflow's signalKey is
// the same).
func runSignalKey(kind, runner, run string) string { return signals.Key(kind, runner, run) }

func (rt *Runtime) signalEnv() signals.Env {
	return signals.Env{
		Store: rt.store, Client: rt.client, Now: rt.now,
		StartTimer: func(ctx context.Context, t timers.Timer) (bool, error) { return rt.timerSvc().Start(ctx, t) },
		StopTimer:  func(ctx context.Context, id string) (bool, error) { return rt.timerSvc().Stop(ctx, id) },
		Local:      rt.inProcessBroker(),
	}
}

// WaitSignal waits, as the step's next call, for the signal name sent to
// the run ([Runtime.Signal]), for at most timeout (0: no limit), and
// decodes its value into v (unless v is nil). It reports true when a
// signal came, false when the wait timed out. When no signal of the name
// is there yet, it returns an error, which the step returns (it may
// return anything: the run waits all the same): the run waits, holding
// no goroutine and no message, and when the signal arrives, or the
// timeout passes, whichever process serves the agent runs the step
// again, where its earlier calls return what they returned and this one
// the signal. A signal sent before the wait is kept and taken by it;
// signals of one name are taken in the order sent, each once.
func (sc *StepContext[State]) WaitSignal(name string, timeout time.Duration, v any) (bool, error) {
	rc, c := sc.RunContext, sc.calls
	if c == nil || rc.rt == nil {
		return false, errors.New("agent: WaitSignal outside a custom agent's step")
	}
	_, _, callID := c.next(rc)
	ev, err := json.Marshal(inferenceEvent{Step: rc.Step})
	if err != nil {
		return false, err
	}
	w := &signals.Wait{
		Key: agentSignalKey(rc.Agent, rc.RunID), Call: strconv.Itoa(rc.Step) + "/" + callID, Name: name, Timeout: timeout,
		Wake: signals.Wake{Channel: inferenceChannel(rc.Agent), Data: ev, Key: rc.RunID,
			EventID:  engine.InferenceID(rc.RunID, rc.Step) + ".wait." + callID,
			Metadata: calf.Metadata{CorrelationID: c.correlationID, RunID: rc.RunID, SessionID: rc.SessionID}},
	}
	sig, timedOut, err := w.Do(rc, rc.rt.signalEnv())
	if errors.Is(err, signals.ErrWaiting) {
		c.waiting = true
		return false, fmt.Errorf("%w: %w", errAwait, err)
	}
	if err != nil || timedOut {
		return false, err
	}
	if v != nil && len(sig.Value) > 0 {
		if err := json.Unmarshal(sig.Value, v); err != nil {
			return true, fmt.Errorf("agent: decode signal %s: %w", name, err)
		}
	}
	return true, nil
}
