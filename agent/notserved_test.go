package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/kafka"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// callerBrokers are the brokers a caller may find no process serving an
// agent on: the in-process one, NATS (an embedded server) and Kafka (an
// in-process fake cluster), where workers are other processes.
var callerBrokers = []struct {
	name string
	open func(t *testing.T) calf.Broker
}{
	{"memory", func(t *testing.T) calf.Broker {
		b := memory.New(nil)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	{"nats", func(t *testing.T) calf.Broker {
		b, err := embedded.Open(t.Context(), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	{"kafka", func(t *testing.T) calf.Broker {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		b, err := kafka.Open(t.Context(), c.ListenAddrs(), &kafka.Options{Partitions: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
}

// Run on an agent that no process serves fails with ErrNotServed within
// five seconds (the default start timeout is three), names the agent and
// its input channel, and cancels the run so that a worker starting later
// does not carry it out; RunStream says the same.
func TestRunWithNoProcessServing(t *testing.T) {
	for _, bt := range callerBrokers {
		t.Run(bt.name, func(t *testing.T) {
			t.Parallel()
			b := bt.open(t)
			c := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = c.Close() })
			rt := agent.NewRuntime(c, storemem.New(), nil)
			a := agent.Must(agent.New("lonely", modeltest.NewTestModel(modeltest.Text("hi")), nil))
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := a.Run(ctx, rt, "anyone?", &agent.RunOptions{RunID: "r1"})
			if !errors.Is(err, agent.ErrNotServed) || !errors.Is(err, agent.ErrRunCancelled) {
				t.Fatalf("err = %v; want ErrNotServed and ErrRunCancelled", err)
			}
			for _, want := range []string{"lonely", "calf.agent.lonely.input", "WaitForWorkers"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			st, err := rt.LoadState(t.Context(), "r1")
			if err != nil || st.Status != agent.RunCancelled {
				t.Fatalf("run record %+v, %v; want cancelled", st, err)
			}

			// RunStream says the same, after the agent's own start timeout.
			a = agent.Must(agent.New("lonely", modeltest.NewTestModel(modeltest.Text("hi")), &agent.Options{StartTimeout: 50 * time.Millisecond}))
			var last error
			for _, err := range a.RunStream(runCtx(t), rt, "anyone?", nil) {
				last = err
			}
			if !errors.Is(last, agent.ErrNotServed) {
				t.Errorf("RunStream ended with %v; want ErrNotServed", last)
			}
		})
	}
}

// With WaitForWorkers, Run waits past the start timeout and completes once
// a process serves the agent.
func TestRunWaitsForWorkers(t *testing.T) {
	for _, bt := range callerBrokers {
		t.Run(bt.name, func(t *testing.T) {
			b := bt.open(t)
			st := storemem.New()
			caller := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = caller.Close() })
			rt := agent.NewRuntime(caller, st, nil)
			a := agent.Must(agent.New("patient", modeltest.NewTestModel(modeltest.Text("at last")), &agent.Options{StartTimeout: 20 * time.Millisecond}))
			type result struct {
				out *agent.Output[string]
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := a.Run(runCtx(t), rt, "hello?", &agent.RunOptions{RunID: "r1-" + bt.name, WaitForWorkers: true})
				done <- result{out, err}
			}()
			// Nothing takes the run until the agent is served. A run of
			// another agent with the same start timeout, started after it
			// and not waiting for workers, is cancelled by its start
			// check: by then the first run's check, were it made, would
			// have cancelled it too.
			control := agent.Must(agent.New("impatient", modeltest.NewTestModel(modeltest.Text("never")), &agent.Options{StartTimeout: 20 * time.Millisecond}))
			if _, err := control.Run(runCtx(t), rt, "anyone?", &agent.RunOptions{RunID: "r0-" + bt.name}); !errors.Is(err, agent.ErrNotServed) {
				t.Fatalf("the run of an agent no process serves: %v; want ErrNotServed", err)
			}
			if _, err := rt.LoadState(t.Context(), "r1-"+bt.name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the run exists before any process serves the agent: %v", err)
			}
			select {
			case r := <-done:
				t.Fatalf("Run returned before a worker started: %+v, %v", r.out, r.err)
			default:
			}
			// The worker is another client, as in another process.
			w := agent.NewWorker(b, st, nil)
			if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				stop()
				<-ran
			}()
			r := <-done
			if r.err != nil || r.out.Output != "at last" {
				t.Fatalf("Run = %+v, %v", r.out, r.err)
			}
		})
	}
}

// A run submitted before any process has ever served the agent waits for
// the first worker, which carries it out: on NATS, whose stream keeps a
// message only for the groups that exist when it is published, the
// submit prepares the group of the agent's input first.
func TestSubmitBeforeAnyWorker(t *testing.T) {
	for _, bt := range callerBrokers[1:] { // the in-process broker has no workers elsewhere
		t.Run(bt.name, func(t *testing.T) {
			b := bt.open(t)
			st := storemem.New()
			caller := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = caller.Close() })
			rt := agent.NewRuntime(caller, st, nil)
			a := agent.Must(agent.New("early", modeltest.NewTestModel(modeltest.Text("served")), &agent.Options{StartTimeout: 15 * time.Second}))
			id, err := a.Submit(t.Context(), rt, "anyone yet?", nil)
			if err != nil {
				t.Fatal(err)
			}
			// The worker is another client, as in another process, that
			// starts once the run was sent.
			w := agent.NewWorker(b, st, nil)
			if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				stop()
				<-ran
			}()
			wctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			out, err := a.Wait(wctx, rt, id)
			if err != nil || out.Output != "served" {
				t.Fatalf("Wait = %+v, %v; want the run carried out by the worker that started after it was sent", out, err)
			}
		})
	}
}
