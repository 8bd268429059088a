package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/storetest"
)

// concurrentDeliveries returns a broker whose subscriptions call their
// handler n times at once for every delivery of a message whose channel
// contains part: what a worker does when a message still being retried is
// delivered again beside it (its partition's lease lost and taken again).
// The delivery fails with the calls' errors, joined.
func concurrentDeliveries(b calf.Broker, n int, part string) calf.Broker {
	return &concurrent{Broker: b, n: n, part: part}
}

type concurrent struct {
	calf.Broker
	n    int
	part string
}

func (c *concurrent) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if h == nil {
		return c.Broker.Subscribe(ctx, pattern, nil, opts)
	}
	return c.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		if !strings.Contains(msg.Channel, c.part) {
			return h(ctx, msg)
		}
		errs := make([]error, c.n)
		var wg sync.WaitGroup
		for i := range c.n {
			wg.Go(func() { errs[i] = h(ctx, msg.Clone()) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}, opts)
}

func (c *concurrent) Unwrap() calf.Broker { return c.Broker }

// A tool call delivered three times at once, whose result fails to be
// recorded four times, runs its tool once: a delivery that finds the call
// in progress in the process waits for it, and one that finds its result
// unrecorded records that result.
func TestToolRunsOnceWhileDeliveredAgain(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			wrap := func(b calf.Broker) calf.Broker {
				if proto.wrap != nil {
					b = proto.wrap(b)
				}
				return concurrentDeliveries(b, 3, ".tool_call.")
			}
			var runPuts, fails atomic.Int64
			fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
				if c.Op != storetest.OpPut {
					return storetest.NoFault
				}
				// The result's write: the run's third on a local broker,
				// the result's own record on another.
				result := proto.wrap == nil && c.Kind == store.KindRun && runPuts.Add(1) >= 3 ||
					proto.wrap != nil && c.Kind == store.KindToolResult
				if result && fails.Add(1) <= 4 {
					return storetest.Fail
				}
				return storetest.NoFault
			}}, storeFaultAttempts, wrap)
			var ids []string
			for i := range 5 {
				id := fmt.Sprintf("r%d", i)
				fails.Store(0)
				runPuts.Store(0)
				out, err := fe.agent.Run(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: id})
				if err != nil || out.Output != "The sum is 5" {
					t.Fatalf("run %s: %v, %v", id, out, err)
				}
				ids = append(ids, id)
			}
			fe.checkRuns(t, ids)
		})
	}
}

// More tool results than the old in-process bound (1,024) executed while
// their recording fails are all kept until recorded: each tool runs once
// however many of them wait.
func TestManyUnrecordedToolResultsKept(t *testing.T) {
	const runs = 1100
	var open atomic.Bool
	fe := newFaultEnvWith(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op == storetest.OpPut && c.Kind == store.KindToolResult && !open.Load() {
			return storetest.Fail
		}
		return storetest.NoFault
	}}, 100000, &envOptions{wrap: notLocal, backoff: 20 * time.Millisecond})
	errs := make(chan error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			_, err := fe.agent.Submit(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: fmt.Sprintf("run-%04d", i)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every tool has run, and every result is waiting to be recorded
	// (bounds for 1,100 runs under -race on a loaded machine).
	testwait.ForErr(t, time.Minute, "every tool to run", func() error {
		if n := fe.toolCalls.Load(); n < runs {
			return fmt.Errorf("%d tools ran of %d", n, runs)
		}
		return nil
	})
	open.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range runs {
		id := fmt.Sprintf("run-%04d", i)
		out, err := fe.agent.Wait(ctx, fe.rt, id)
		if err != nil || out.Output != "The sum is 5" {
			t.Fatalf("run %s: %v, %v", id, out, err)
		}
	}
	fe.settle(t)
	if n := fe.toolCalls.Load(); n != runs {
		t.Errorf("the tool ran %d times for %d runs", n, runs)
	}
}

// A model response whose recording fails is not asked of the model again
// when its inference is delivered again, nor when the inference is
// delivered three times at once: the deliveries share one model call.
func TestModelCalledOnceWhenRecordingFails(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			wrap := func(b calf.Broker) calf.Broker {
				if proto.wrap != nil {
					b = proto.wrap(b)
				}
				return concurrentDeliveries(b, 3, ".inference")
			}
			var runPuts atomic.Int64
			fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
				// The run's second write records the first model response:
				// it fails, and its next three tries.
				if c.Op == storetest.OpPut && c.Kind == store.KindRun {
					if n := runPuts.Add(1); n >= 2 && n <= 5 {
						return storetest.Fail
					}
				}
				return storetest.NoFault
			}}, storeFaultAttempts, wrap)
			out, err := fe.agent.Run(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"})
			if err != nil || out.Output != "The sum is 5" {
				t.Fatalf("run: %v, %v", out, err)
			}
			fe.checkRuns(t, []string{"r1"})
			if n := fe.modelCalls.Load(); n != 2 {
				t.Errorf("the model was called %d times for a run of two steps", n)
			}
		})
	}
}
