package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
)

// edgeFlags configure the commands that offer the agent over a protocol
// (calf mcp serve, calf a2a serve): the agent, where its runs go, and the
// bearer token of HTTP clients.
type edgeFlags struct {
	agentFlags
	store, broker string
	serve         bool
	token         string
	// retention is the worker's (WorkerOptions.Retention), for the
	// commands that register --retention.
	retention time.Duration
	// record has the edge record the event log of the runs (edge.log).
	record bool
}

func (f *edgeFlags) register(fl *pflag.FlagSet) {
	f.agentFlags.register(fl)
	f.registerAgents(fl, true)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp)
	fl.StringVar(&f.broker, "broker", defaultBroker, brokerHelp)
	fl.BoolVar(&f.serve, "serve", false, "serve the agent in this process too, when --broker is shared with calf worker processes")
}

// checkListen refuses to listen on addr (the value of --flag) beyond
// loopback without a bearer token.
func checkListen(flag, addr, token, env string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError(fmt.Errorf("--%s %q: %v", flag, addr, err))
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && token == "" {
		return usageError(fmt.Errorf("--%s %s listens beyond loopback: give a bearer token with --token or $%s", flag, addr, env))
	}
	return nil
}

// edge is the agent of a protocol command, on a worker's runtime: served
// here with an in-process broker or --serve, else by calf worker
// processes.
type edge struct {
	agent *agent.Agent[string]
	rt    *agent.Runtime
	// log is the event log the edge records, with edgeFlags.record.
	log *eventlog.Log
	// close stops the worker and closes the broker and the store.
	close func()
}

// openEdge opens the broker and store of f, and serves the agent on a
// worker running until close.
func openEdge(ctx context.Context, f *edgeFlags, getenv func(string) string) (*edge, error) {
	if err := checkBroker(f.broker); err != nil {
		return nil, err
	}
	if err := checkStore(f.store); err != nil {
		return nil, err
	}
	serve := f.serve || adapters.InProcess(f.broker)
	a, err := newAssistant(ctx, &f.agentFlags, getenv, serve)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, f.store, nil)
	if err != nil {
		return nil, err
	}
	b, err := openBroker(ctx, f.broker, nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	w := agent.NewWorker(b, st, &agent.WorkerOptions{Client: &calf.Options{Name: calf.ProcessName()}, DrainTimeout: shutdownTimeout, Retention: f.retention, Runtime: runtimeOptions(ctx)})
	// The event logs that calf serve records go with the runs.
	w.Runtime().AddSweeper("eventlog", eventlog.Sweep)
	if serve {
		if err := a.Serve(ctx, w.Runtime(), nil); err != nil {
			b.Close()
			st.Close()
			return nil, failure(err)
		}
	}
	var log *eventlog.Log
	if f.record {
		// Recording starts before the runs left unfinished go on, so that
		// their events are logged.
		log = eventlog.New(w.Runtime().Client(), st)
		if err := log.Record(ctx, nil); err != nil {
			b.Close()
			st.Close()
			return nil, failure(err)
		}
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	if serve && adapters.InProcess(f.broker) {
		// The in-process broker lost the events of the runs a previous
		// process left unfinished: publish them again from the store, so
		// that those runs go on (and a page following one sees its end).
		if _, err := a.Recover(ctx, w.Runtime(), nil); err != nil {
			stop()
			<-ran
			b.Close()
			st.Close()
			return nil, failure(fmt.Errorf("recover the runs left unfinished: %w", err))
		}
	}
	return &edge{agent: a, rt: w.Runtime(), log: log, close: func() {
		stop()
		<-ran
		b.Close()
		st.Close()
	}}, nil
}

// serveHTTP serves h on l until ctx ends, then shuts the server down,
// letting requests in progress finish for up to shutdownTimeout.
func serveHTTP(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return failure(err)
	}
	return nil
}
