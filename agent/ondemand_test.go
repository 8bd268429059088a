package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// The process's local runtime serves an agent on its first run: Run,
// RunStream, Submit and Recover need no Serve, and the other methods find
// the runs there.
func TestLocalRuntimeServesOnDemand(t *testing.T) {
	rt := local.Runtime()
	if rt != local.Runtime() {
		t.Fatal("local.Runtime returned two runtimes")
	}
	if !rt.ServesOnDemand() {
		t.Fatal("the local runtime does not serve on demand")
	}
	m := modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two"), modeltest.Text("three"))
	a := agent.Must(agent.NewText("on_demand", m, ""))
	ctx := runCtx(t)
	out, err := a.Run(ctx, rt, "hi", nil)
	if err != nil || out.Output != "one" {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	if got, err := a.Wait(ctx, rt, out.RunID); err != nil || got.Output != "one" {
		t.Errorf("Wait for an ended run: %+v, %v", got, err)
	}
	id, err := a.Submit(ctx, rt, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Wait(ctx, rt, id); err != nil || got.Output != "two" {
		t.Errorf("Wait: %+v, %v", got, err)
	}
	var last string
	for ev, err := range a.RunStream(ctx, rt, "hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventOutput {
			last = string(ev.Output.Content)
		}
	}
	if last != `"three"` {
		t.Errorf("RunStream's output: %s", last)
	}
	if err := a.Pause(ctx, rt, out.RunID, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Pause of an ended run: %v, want ErrRunEnded", err)
	}
	if err := a.Resume(ctx, rt, out.RunID); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("Resume of an ended run: %v, want ErrRunEnded", err)
	}
	if err := a.Cancel(ctx, rt, out.RunID, "x"); err != nil {
		t.Errorf("Cancel of an ended run: %v", err)
	}
	if _, err := a.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover: %v", err)
	}
	// An agent whose first call is Recover is served by it.
	b := agent.Must(agent.NewText("on_demand_b", modeltest.NewTestModel(modeltest.Text("b")), ""))
	if _, err := b.Recover(ctx, rt, nil); err != nil {
		t.Errorf("Recover of an agent not served yet: %v", err)
	}
	if out, err := b.Run(ctx, rt, "hi", nil); err != nil || out.Output != "b" {
		t.Errorf("Run after Recover: %+v, %v", out, err)
	}
	// A custom agent's state is read and written there too.
	type count struct{ N int }
	c := agent.Must(agent.NewCustom("on_demand_custom", func(sc *agent.StepContext[count], _ []model.Message) (string, error) {
		sc.State.N++
		return "counted", nil
	}, nil))
	if err := c.SetState(ctx, rt, "s1", count{N: 41}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, rt, "count", &agent.RunOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.State(ctx, rt, "s1"); err != nil || s.N != 42 {
		t.Errorf("State: %+v, %v; want N 42", s, err)
	}
}

// countingBroker counts the subscriptions of each consumer group; it
// wraps a broker without hiding it (Unwrap), so a local broker stays
// local.
type countingBroker struct {
	calf.Broker
	mu     sync.Mutex
	groups map[string]int
}

func (b *countingBroker) Unwrap() calf.Broker { return b.Broker }

func (b *countingBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if opts != nil && opts.Group != "" {
		b.mu.Lock()
		b.groups[opts.Group]++
		b.mu.Unlock()
	}
	return b.Broker.Subscribe(ctx, pattern, h, opts)
}

func (b *countingBroker) count(group string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.groups[group]
}

// A runtime that serves on demand serves each agent once however many
// runs start there, and not again after Serve; a runtime that does not
// serves nothing by itself.
func TestServeOnDemandServesOnce(t *testing.T) {
	newRuntime := func(onDemand bool) (*agent.Runtime, *countingBroker) {
		mb := memory.New(nil)
		t.Cleanup(func() { mb.Close() })
		b := &countingBroker{Broker: mb, groups: map[string]int{}}
		return agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), &agent.RuntimeOptions{ServeOnDemand: onDemand}), b
	}
	ctx := runCtx(t)
	rt, b := newRuntime(true)
	if !rt.ServesOnDemand() {
		t.Fatal("ServesOnDemand is false on a runtime made with ServeOnDemand")
	}
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("ok"), nil
	})
	a := agent.Must(agent.NewText("once", m, ""))
	// Runs started at once serve the agent once between them.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := a.Run(ctx, rt, "hi", nil); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	wg.Wait()
	id, err := a.Submit(ctx, rt, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(ctx, rt, id); err != nil {
		t.Fatal(err)
	}
	for _, err := range a.RunStream(ctx, rt, "hi", nil) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Recover(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count(agent.InputChannel("once")); n != 1 {
		t.Errorf("the agent's input handler subscribed %d times, want once", n)
	}
	// Served by Serve first, an agent is not served again by its runs.
	served := agent.Must(agent.NewText("served_first", m, ""))
	if err := served.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := served.Run(ctx, rt, "hi", nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count(agent.InputChannel("served_first")); n != 1 {
		t.Errorf("an agent served first subscribed %d times, want once", n)
	}
	// The same agent on a second runtime is served there too.
	rt2, b2 := newRuntime(true)
	if _, err := a.Run(ctx, rt2, "hi", nil); err != nil {
		t.Fatal(err)
	}
	if n := b2.count(agent.InputChannel("once")); n != 1 {
		t.Errorf("on a second runtime the agent subscribed %d times, want once", n)
	}
	// A runtime that does not serve on demand leaves serving to Serve.
	plain, pb := newRuntime(false)
	if plain.ServesOnDemand() {
		t.Error("ServesOnDemand is true on a runtime made without ServeOnDemand")
	}
	if _, err := a.Submit(ctx, plain, "hi", nil); err != nil {
		t.Fatal(err)
	}
	if n := pb.count(agent.InputChannel("once")); n != 0 {
		t.Errorf("a runtime without ServeOnDemand served the agent (%d subscriptions)", n)
	}
	var none *agent.Runtime
	if none.ServesOnDemand() {
		t.Error("a nil runtime serves on demand")
	}
}

// local.New makes a runtime of its own: runs on it are not in the
// process's runtime, nor in another one made by New.
func TestLocalNewIsApart(t *testing.T) {
	ctx := runCtx(t)
	rt1, rt2 := local.New(nil), local.New(&local.Options{Runtime: &agent.RuntimeOptions{NewID: func() string { return "fixed-id" }}})
	for _, rt := range []*agent.Runtime{rt1, rt2} {
		t.Cleanup(func() { rt.Client().Broker().Close() })
		if !rt.ServesOnDemand() || rt == local.Runtime() {
			t.Fatalf("local.New: serves on demand %v, the process's runtime %v", rt.ServesOnDemand(), rt == local.Runtime())
		}
	}
	a := agent.Must(agent.NewText("apart", modeltest.NewTestModel(modeltest.Text("one"), modeltest.Text("two")), ""))
	out, err := a.Run(ctx, rt2, "hi", nil)
	if err != nil || out.RunID != "fixed-id" {
		t.Fatalf("Run on a runtime with its own ids: %+v, %v", out, err)
	}
	for _, rt := range []*agent.Runtime{rt1, local.Runtime()} {
		if _, err := rt.LoadAgentRun(ctx, out.RunID); err == nil {
			t.Errorf("a run of one local runtime is found in another")
		}
	}
	if out, err := a.Run(ctx, rt1, "hi", nil); err != nil || out.Output != "two" {
		t.Errorf("Run on a second local runtime: %+v, %v", out, err)
	}
}

// A nil runtime is an error matching ErrNoRuntime, never a panic and
// never a runtime picked in its place: for every method of an agent and
// of a custom agent that takes one, and for the methods of a nil
// *Runtime.
func TestNilRuntimeIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a := agent.Must(agent.NewText("nil_runtime", modeltest.NewTestModel(modeltest.Text("never")), ""))
	c := agent.Must(agent.NewCustom("nil_runtime_custom", func(*agent.StepContext[struct{ N int }], []model.Message) (string, error) {
		return "", nil
	}, nil))
	var rt *agent.Runtime
	ref := agent.RunRef{Kind: "agent", Name: "nil_runtime", RunID: "r1"}
	calls := map[string]func() error{
		"Serve": func() error { return a.Serve(ctx, nil, nil) },
		"Run": func() error {
			_, err := a.Run(ctx, nil, "hi", nil)
			return err
		},
		"RunStream": func() error {
			var first error
			for _, err := range a.RunStream(ctx, nil, "hi", nil) {
				first = err
				break
			}
			return first
		},
		"Submit": func() error {
			_, err := a.Submit(ctx, nil, "hi", nil)
			return err
		},
		"Wait": func() error {
			_, err := a.Wait(ctx, nil, "r1")
			return err
		},
		"Cancel": func() error { return a.Cancel(ctx, nil, "r1", "x") },
		"Pause":  func() error { return a.Pause(ctx, nil, "r1", "x") },
		"Resume": func() error { return a.Resume(ctx, nil, "r1") },
		"Recover": func() error {
			_, err := a.Recover(ctx, nil, nil)
			return err
		},
		"Custom.State": func() error {
			_, err := c.State(ctx, nil, "s1")
			return err
		},
		"Custom.SetState": func() error { return c.SetState(ctx, nil, "s1", struct{ N int }{1}) },
		"Runtime.Submit": func() error {
			return rt.Submit(ctx, &agent.SubmitRequest{Run: ref, Input: &agent.InputEvent{Content: "hi"}})
		},
		"Runtime.Cancel": func() error {
			_, err := rt.Cancel(ctx, ref, "x")
			return err
		},
		"Runtime.Pause": func() error {
			_, err := rt.Pause(ctx, ref, "x")
			return err
		},
		"Runtime.Resume": func() error {
			_, err := rt.Resume(ctx, ref)
			return err
		},
		"Runtime.SetBudget": func() error {
			_, err := rt.SetBudget(ctx, ref, nil)
			return err
		},
		"Runtime.LoadRun": func() error {
			_, err := rt.LoadAgentRun(ctx, "r1")
			return err
		},
		"Runtime.Recording": func() error {
			_, err := rt.Recording(ctx, "r1")
			return err
		},
		"Runtime.Sweep": func() error {
			_, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now()})
			return err
		},
		"Runtime.SetSessionBudget": func() error { return rt.SetSessionBudget(ctx, "s1", nil) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, agent.ErrNoRuntime) {
				t.Errorf("%s with a nil runtime: %v, want ErrNoRuntime", name, err)
			}
		})
	}
	// Nothing was served: the agent still takes tools.
	if err := a.AddSubagent(agent.Named("helper", "Helps."), nil); err != nil {
		t.Errorf("AddSubagent after the calls with a nil runtime: %v", err)
	}
}
