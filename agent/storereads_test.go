package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// opCounter counts the operations on the store it wraps, by kind.
type opCounter struct {
	store.Store
	runGets, runPuts, runConflicts, otherGets, otherPuts atomic.Int64
}

func (c *opCounter) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if kind == store.KindRun {
		c.runGets.Add(1)
	} else {
		c.otherGets.Add(1)
	}
	return c.Store.Get(ctx, kind, id)
}

func (c *opCounter) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	v, err := c.Store.Put(ctx, kind, id, data, version)
	if kind == store.KindRun {
		c.runPuts.Add(1)
		if errors.Is(err, store.ErrConflict) {
			c.runConflicts.Add(1)
		}
	} else {
		c.otherPuts.Add(1)
	}
	return v, err
}

// serveW1On serves W1 on a worker runtime over s, on e's broker, with the
// add tool wrapped by during, which runs before the tool adds. The caller
// goes through e.rt, as a caller in another process would.
func serveW1On(t *testing.T, e *env, s store.Store, during func(ctx context.Context)) *agent.Agent[string] {
	t.Helper()
	var calls atomic.Int64
	add, err := tool.New("add", "Add two integers.", func(ctx context.Context, in addArgs) (int, error) {
		if during != nil {
			during(ctx)
		}
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New("calculator", w1Model(&calls), &agent.Options{Tools: []tool.Tool{add}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), agent.NewRuntime(e.client, s, nil), nil); err != nil {
		t.Fatal(err)
	}
	return a
}

// A worker reads a run from the store only where it must: on a broker
// that is not local, once per model call (before it calls the model, so
// that a redelivered inference does not call it again) and never to
// update a run it has just written; a W1 run takes two reads of the run
// and one of the tool result (the check that the call has not run yet),
// and eight writes: four of the run, one of the tool's result, and the
// claims of its three calls (two of the model, one of the tool: engine.Claims),
// which keep another process from making a call this one has in hand. On a local
// broker, whose deliveries all come to this process, the worker's own copy
// of a run it created stands for the store: no reads; and the tool's
// result goes into the run's record with the step's advance, one write
// where the result's own record and the advance took two: four writes.
func TestWorkerStoreOperationsPerRun(t *testing.T) {
	for _, tc := range []struct {
		name               string
		wrap               func(calf.Broker) calf.Broker
		runGets, otherGets int64
		otherPuts          int64
	}{
		{"local", nil, 0, 0, 0},
		{"not local", notLocal, 2, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, &envOptions{wrap: tc.wrap})
			if got := calf.IsLocal(e.client.Broker()); got != (tc.wrap == nil) {
				t.Fatalf("IsLocal = %v", got)
			}
			counted := &opCounter{Store: e.store}
			a := serveW1On(t, e, counted, nil)
			out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
			if err != nil || out.Output != "The sum is 5" {
				t.Fatalf("Run = %+v, %v", out, err)
			}
			e.settle(t)
			if n := counted.runGets.Load(); n != tc.runGets {
				t.Errorf("the worker read the run %d times, want %d", n, tc.runGets)
			}
			if n := counted.otherGets.Load(); n != tc.otherGets {
				t.Errorf("the worker read other records %d times, want %d", n, tc.otherGets)
			}
			if n, m := counted.runPuts.Load(), counted.otherPuts.Load(); n != 4 || m != tc.otherPuts {
				t.Errorf("the worker wrote the run %d times and other records %d times, want 4 and %d", n, m, tc.otherPuts)
			}
			if n := counted.runConflicts.Load(); n != 0 {
				t.Errorf("%d writes of the run conflicted with no other writer", n)
			}
		})
	}
}

// When another process writes a run while the worker executes its tool,
// the state the worker cached is behind: its write of the tool result
// conflicts, and the result is recorded on the stored state, which keeps
// the other process's change.
func TestWorkerCachedStateBehindTheStore(t *testing.T) {
	e := newEnv(t, nil)
	counted := &opCounter{Store: e.store}
	var runID atomic.Value
	a := serveW1On(t, e, counted, func(ctx context.Context) {
		// Another process adds a marker to the run's state.
		rc, _ := agent.FromContext(ctx)
		id := rc.RunID
		runID.Store(id)
		if _, err := store.Update(ctx, e.store, store.KindRun, id, func(data []byte, _ bool) ([]byte, error) {
			st, err := agent.DecodeRunState(data)
			if err != nil {
				return nil, err
			}
			st.Correlation = "changed-elsewhere"
			return json.Marshal(st)
		}); err != nil {
			t.Error(err)
		}
	})
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil || out.Output != "The sum is 5" {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	e.settle(t)
	st, err := e.rt.LoadState(t.Context(), runID.Load().(string))
	if err != nil {
		t.Fatal(err)
	}
	if st.Correlation != "changed-elsewhere" || len(st.ToolCalls) != 1 || st.ToolCalls[0].Result.Text() != "5" {
		t.Errorf("stored run: correlation %q, tool calls %+v; want the other write kept and the result recorded", st.Correlation, st.ToolCalls)
	}
	if n := counted.runConflicts.Load(); n != 1 {
		t.Errorf("%d writes of the run conflicted, want 1 (the write from the cached state)", n)
	}
}

// A run cancelled by another process while its tool runs stays
// cancelled: the worker's cached state still shows it running, but the
// result is recorded against the stored, cancelled run, which it does not
// advance.
func TestWorkerCachedStateOfCancelledRun(t *testing.T) {
	e := newEnv(t, nil)
	var runID atomic.Value
	a := serveW1On(t, e, e.store, func(ctx context.Context) {
		rc, _ := agent.FromContext(ctx)
		id := rc.RunID
		runID.Store(id)
		if _, err := e.rt.Cancel(ctx, agent.RunRef{Name: "calculator", RunID: id}, "stop"); err != nil {
			t.Error(err)
		}
	})
	_, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Status != agent.RunCancelled {
		t.Fatalf("Run error = %v, want the run cancelled", err)
	}
	e.settle(t)
	st, err := e.rt.LoadState(t.Context(), runID.Load().(string))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || st.Step != 1 || len(st.ToolCalls) != 0 {
		t.Errorf("stored run: status %s, step %d, tool calls %+v; want cancelled at step 1 with no call recorded", st.Status, st.Step, st.ToolCalls)
	}
}

// A process that serves an agent on a local broker and runs it reads
// nothing from the store for a W1 run: its caller takes the ended run's
// state from the process's copy too.
func TestOneProcessRunReadsNothing(t *testing.T) {
	e := newEnv(t, nil)
	counted := &opCounter{Store: e.store}
	rt := agent.NewRuntime(e.client, counted, nil)
	var calls atomic.Int64
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil }))
	a := agent.Must(agent.New("calculator", w1Model(&calls), &agent.Options{Tools: []tool.Tool{add}}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), rt, "add 2 and 3", nil)
	if err != nil || out.Output != "The sum is 5" || len(out.Thread) != 4 || len(out.ToolCalls) != 1 {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	e.settle(t)
	if n, m := counted.runGets.Load(), counted.otherGets.Load(); n != 0 || m != 0 {
		t.Errorf("%d reads of the run and %d of other records, want none", n, m)
	}
}

// hookBroker calls before ahead of every delivery's handler; it wraps a
// broker without hiding it (Unwrap), so a local broker stays local.
type hookBroker struct {
	calf.Broker
	before func(*calf.Message)
}

func (h *hookBroker) Unwrap() calf.Broker { return h.Broker }

func (h *hookBroker) Subscribe(ctx context.Context, pattern string, handler calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return h.Broker.Subscribe(ctx, pattern, func(ctx context.Context, m *calf.Message) error {
		h.before(m)
		return handler(ctx, m)
	}, opts)
}

// On a local broker, a run cancelled by another process between its tool
// result and its next model call is found cancelled: the worker's copy
// still shows the model call due, and the model may be called, but its
// answer is not recorded and the run ends cancelled.
func TestLocalCopyBehindBeforeModelCall(t *testing.T) {
	var other *agent.Runtime
	var once sync.Once
	e := newEnv(t, &envOptions{wrap: func(b calf.Broker) calf.Broker {
		return &hookBroker{Broker: b, before: func(m *calf.Message) {
			var ev agent.InferenceEvent
			if m.Channel != agent.InferenceChannel("calculator") || m.Decode(&ev) != nil || ev.Step != 2 {
				return
			}
			once.Do(func() {
				if _, err := other.Cancel(context.Background(), agent.RunRef{Name: "calculator", RunID: m.Metadata.RunID}, "stop"); err != nil {
					t.Error(err)
				}
			})
		}}
	}})
	if !calf.IsLocal(e.client.Broker()) {
		t.Fatal("the hooked broker is not local")
	}
	other = agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	t.Cleanup(func() { _ = other.Client().Close() })
	a, modelCalls, toolCalls := newW1(t, e)
	_, err := a.Run(runCtx(t), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "stale"})
	var re *agent.RunError
	if !errors.As(err, &re) || re.Status != agent.RunCancelled {
		t.Fatalf("Run error = %v, want the run cancelled", err)
	}
	e.settle(t)
	st, err := other.LoadState(t.Context(), "stale")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || len(st.Messages) != 3 || st.Usage.Requests != 1 || len(st.Output) != 0 {
		t.Errorf("stored run: %s, %d messages, %d model calls recorded, output %s; want cancelled after the tool result, one call recorded",
			st.Status, len(st.Messages), st.Usage.Requests, st.Output)
	}
	t.Logf("%d model calls", modelCalls.Load())
	if n, m := modelCalls.Load(), toolCalls.Load(); n > 2 || m != 1 {
		t.Errorf("%d model calls and %d tool executions; want at most 2 and 1", n, m)
	}
}

// publishFailer fails the first publish on one channel; it wraps a broker
// without hiding it (Unwrap), so a local broker stays local.
type publishFailer struct {
	calf.Broker
	channel string
	failed  atomic.Bool
}

func (p *publishFailer) Unwrap() calf.Broker { return p.Broker }

func (p *publishFailer) Publish(ctx context.Context, m *calf.Message) error {
	if m.Channel == p.channel && p.failed.CompareAndSwap(false, true) {
		return errors.New("injected publish failure")
	}
	return p.Broker.Publish(ctx, m)
}

// On a local broker a tool's result goes into the run's record with the
// step's advance, before its event is published. When that publish fails,
// the call's redelivery finds the result in the advanced run and publishes
// it, without running the tool again: the run is not left waiting for an
// event that never comes.
func TestLocalResultRecordedThenItsEventLost(t *testing.T) {
	var failer *publishFailer
	e := newEnv(t, &envOptions{wrap: func(b calf.Broker) calf.Broker {
		failer = &publishFailer{Broker: b, channel: agent.ToolResultChannel("calculator")}
		return failer
	}})
	counted := &opCounter{Store: e.store}
	rt := agent.NewRuntime(e.client, counted, nil)
	var calls atomic.Int64
	add, toolCalls := addTool(t)
	a := agent.Must(agent.New("calculator", w1Model(&calls), &agent.Options{Tools: []tool.Tool{add}}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), rt, "add 2 and 3", nil)
	if err != nil || out.Output != "The sum is 5" {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	e.settle(t)
	if !failer.failed.Load() {
		t.Fatal("no publish failed")
	}
	if n := toolCalls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if n, m := counted.runPuts.Load(), counted.otherPuts.Load(); n != 4 || m != 0 {
		t.Errorf("%d writes of the run and %d of other records, want 4 and none", n, m)
	}
}
