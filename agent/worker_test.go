package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// ctxBroker hands out the context the broker gives each delivery on
// channel, as it is before the worker sees it.
type ctxBroker struct {
	calf.Broker
	channel string
	ctxs    chan context.Context
}

func (b *ctxBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return b.Broker.Subscribe(ctx, pattern, func(hctx context.Context, msg *calf.Message) error {
		if msg.Channel == b.channel {
			b.ctxs <- hctx
		}
		return h(hctx, msg)
	}, opts)
}

// blockingModel answers once release is closed, failing if its context
// ended first. It sends the error it returns on outcome, if not nil.
func blockingModel(started chan<- struct{}, release <-chan struct{}, outcome chan<- error) modeltest.FunctionModel {
	return func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		started <- struct{}{}
		var err error
		select {
		case <-release:
			err = ctx.Err()
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		if outcome != nil {
			outcome <- err
		}
		if err != nil {
			return nil, err
		}
		return modeltest.Text("finished"), nil
	}
}

// A worker asked to stop lets the model call in progress finish, although
// the broker has closed the subscription and cancelled its delivery, and
// the run completes.
func TestWorkerDrainsInFlight(t *testing.T) {
	mb := memory.New(nil)
	defer mb.Close()
	b := &ctxBroker{Broker: mb, channel: agent.InferenceChannel("slow"), ctxs: make(chan context.Context, 4)}
	st := storemem.New()
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: time.Hour})
	started, release, outcome := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	a := agent.Must(agent.New("slow", blockingModel(started, release, outcome), nil))
	if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()

	// The caller is another client, as in another process.
	caller := agent.NewRuntime(calf.NewClient(mb, nil), st, nil)
	type result struct {
		out *agent.Output[string]
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := a.Run(t.Context(), caller, "go", nil)
		done <- result{out, err}
	}()
	<-started
	brokerCtx := <-b.ctxs
	stop() // as SIGTERM does
	<-brokerCtx.Done()
	close(release)
	if err := <-outcome; err != nil {
		t.Fatalf("the model call in progress was interrupted: %v", err)
	}
	if err := <-ran; err != nil {
		t.Errorf("Run = %v, want nil after a clean drain", err)
	}
	res := <-done
	if res.err != nil || res.out.Output != "finished" {
		t.Errorf("the run = %+v, %v; want finished", res.out, res.err)
	}
}

// A handler still running after the drain timeout is interrupted, and Run
// says so.
func TestWorkerDrainTimeout(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	st := storemem.New()
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: time.Millisecond})
	started := make(chan struct{}, 1)
	a := agent.Must(agent.New("stuck", blockingModel(started, nil, nil), nil))
	if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	caller := agent.NewRuntime(calf.NewClient(b, nil), st, nil)
	if _, err := a.Submit(t.Context(), caller, "go", nil); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	if err := <-ran; err == nil || !strings.Contains(err.Error(), "drain timeout") {
		t.Errorf("Run = %v, want an error about the drain timeout", err)
	}
}

// Interrupt cuts a drain short: the handler in progress is cancelled and
// Run says so.
func TestWorkerInterrupt(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	st := storemem.New()
	logs := &drainLog{draining: make(chan struct{})}
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: time.Hour, Logger: slog.New(logs)})
	started := make(chan struct{}, 1)
	a := agent.Must(agent.New("stuck", blockingModel(started, nil, nil), nil))
	if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	caller := agent.NewRuntime(calf.NewClient(b, nil), st, nil)
	if _, err := a.Submit(t.Context(), caller, "go", nil); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()
	<-logs.draining
	w.Interrupt()
	if err := <-ran; err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("Run = %v, want an error about the interruption", err)
	}
}

// drainLog is a slog handler that closes draining when the worker logs
// that it drains.
type drainLog struct {
	once     sync.Once
	draining chan struct{}
}

func (h *drainLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *drainLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "draining") {
		h.once.Do(func() { close(h.draining) })
	}
	return nil
}
func (h *drainLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *drainLog) WithGroup(string) slog.Handler      { return h }

// A worker's Concurrency bounds the handler calls it makes at once across
// its agents, whatever the broker and the handlers allow: with a bound of
// 2, five runs whose tool blocks have two tool calls in progress, and all
// complete once the tool lets go. The test runs in a synctest bubble (the
// broker and the store are in memory) so that it can wait until nothing
// more can start.
func TestWorkerConcurrencyBoundsHandlerCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New(nil)
		defer b.Close()
		st := storemem.New()
		w := agent.NewWorker(b, st, &agent.WorkerOptions{Concurrency: 2})
		var (
			mu          sync.Mutex
			now, most   int
			release     = make(chan struct{})
			twoInFlight = make(chan struct{})
		)
		closeTwo := sync.OnceFunc(func() { close(twoInFlight) })
		wait := tool.Must(tool.New("wait", "Wait.", func(ctx context.Context, _ struct{}) (string, error) {
			mu.Lock()
			now++
			most = max(most, now)
			if now == 2 {
				closeTwo()
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				now--
				mu.Unlock()
			}()
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return "done", nil
		}))
		m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
				return modeltest.Text("ok"), nil
			}
			return modeltest.ToolCalls(modeltest.Call("c1", "wait", `{}`)), nil
		})
		a := agent.Must(agent.New("bounded", m, &agent.Options{Tools: []tool.Tool{wait}}))
		if err := a.Serve(t.Context(), w.Runtime(), nil); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		go func() { _ = w.Run(ctx) }()
		caller := agent.NewRuntime(calf.NewClient(b, nil), st, nil)
		var runs sync.WaitGroup
		errs := make(chan error, 5)
		for range 5 {
			runs.Go(func() {
				_, err := a.Run(t.Context(), caller, "go", nil)
				errs <- err
			})
		}
		select {
		case <-twoInFlight:
		case <-time.After(10 * time.Second):
			t.Fatal("two tool calls never ran at once")
		}
		// Once every goroutine is blocked, a third call has had its chance
		// to start, were it allowed to.
		synctest.Wait()
		close(release)
		runs.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if most != 2 {
			t.Errorf("at most %d tool calls ran at once, want 2", most)
		}
		// The bubble ends once its goroutines have: the executor's idle
		// ones after a second without calls, on the bubble's clock.
		time.Sleep(2 * time.Second)
	})
}
