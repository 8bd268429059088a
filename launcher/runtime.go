package launcher

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/runner"
)

// env is a command's runtime on --broker and --store: a worker serving the
// program's runners, or a caller's runtime that only starts runs.
type env struct {
	rt *agent.Runtime
	// close stops the worker, if any (interrupt: without draining the
	// handlers in progress), and closes the broker and the store.
	close func(interrupt bool)
}

// checkURLs validates --broker and --store without opening them.
func (l *launch) checkURLs() error {
	if err := adapters.CheckBrokerURL(l.broker); err != nil {
		return usageError(fmt.Errorf("--broker: %w", err))
	}
	if scheme, _, ok := strings.Cut(l.store, ":"); !ok || scheme == "" {
		return usageError(fmt.Errorf("--store %s: no scheme: a SQLite file is sqlite:%s", l.store, l.store))
	}
	if err := adapters.CheckStoreURL(l.store); err != nil {
		return usageError(fmt.Errorf("--store: %w", err))
	}
	return nil
}

// open opens --broker and --store. With serve, the runners are served on
// a worker's runtime that serves on demand (a team's members and a
// workflow's agent nodes as their runs start), running until close;
// without, the runtime only starts runs, for the workers on the broker to
// carry out.
func (l *launch) open(ctx context.Context, rs []runner.Runner, serve bool, wo *agent.WorkerOptions) (*env, error) {
	if err := l.checkURLs(); err != nil {
		return nil, err
	}
	st, err := adapters.OpenStore(ctx, l.store, nil)
	if err != nil {
		return nil, openError("--store", err)
	}
	b, err := adapters.OpenBroker(ctx, l.broker, nil)
	if err != nil {
		st.Close()
		return nil, openError("--broker", err)
	}
	if !serve {
		c := calf.NewClient(b, nil)
		return &env{rt: agent.NewRuntime(c, st, nil), close: func(bool) {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			_ = c.Shutdown(sctx)
			b.Close()
			st.Close()
		}}, nil
	}
	var o agent.WorkerOptions
	if wo != nil {
		o = *wo
	}
	o.Client = &calf.Options{Name: calf.ProcessName()}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = shutdownTimeout
	}
	o.Runtime = &agent.RuntimeOptions{ServeOnDemand: true}
	w := agent.NewWorker(b, st, &o)
	rt := w.Runtime()
	// The event logs that serve records go with the runs they log.
	rt.AddSweeper("eventlog", eventlog.Sweep)
	fail := func(err error) (*env, error) {
		b.Close()
		st.Close()
		return nil, failure(err)
	}
	// The subscriptions outlive ctx: the worker drains them as it ends.
	sctx := context.WithoutCancel(ctx)
	for _, r := range rs {
		s, ok := r.(runner.Servable)
		if !ok {
			return fail(fmt.Errorf("%s cannot be served in this process: make it with runner.Agent, runner.Team or runner.Workflow", r.Name()))
		}
		if err := s.Serve(sctx, rt); err != nil {
			return fail(err)
		}
	}
	if err := w.Start(sctx); err != nil {
		return fail(err)
	}
	wctx, stop := context.WithCancel(sctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	return &env{rt: rt, close: func(interrupt bool) {
		if interrupt {
			w.Interrupt()
		}
		stop()
		<-ran
		b.Close()
		st.Close()
	}}, nil
}

// openError is the error of a broker or store that could not be opened:
// a usage error for a malformed URL, a failure for one not reached.
func openError(flag string, err error) error {
	if errors.Is(err, adapters.ErrBadURL) {
		return usageError(fmt.Errorf("%s: %w", flag, err))
	}
	return failure(fmt.Errorf("%s: %w", flag, err))
}

// shared reports whether --broker and --store are reachable by other
// processes, as a worker's must be.
func (l *launch) shared() error {
	if adapters.InProcess(l.broker) {
		return usageError(fmt.Errorf("--broker %s is reachable only from inside this process, so no caller could reach the worker: use nats:// or kafka://", adapters.Redact(l.broker)))
	}
	if strings.HasPrefix(strings.ToLower(l.store), "memory:") {
		return usageError(fmt.Errorf("--store %s keeps state inside this process: use postgres://, redis://, or sqlite:PATH for processes on one machine", l.store))
	}
	return nil
}
