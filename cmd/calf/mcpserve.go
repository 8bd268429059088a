package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/runner"
)

// envMCPToken is the environment variable that holds calf mcp serve's
// bearer token, as --token does.
const envMCPToken = "CALF_MCP_TOKEN"

type mcpServeFlags struct {
	agentFlags
	store, broker string
	serve         bool
	http          string
	token         string
}

func newMCPCommand(getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcp",
		Short: "Offer the agent to MCP clients",
		Args:  cobra.NoArgs,
	}
	var f mcpServeFlags
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent as an MCP tool, on standard input and output or over HTTP",
		Long: `calf mcp serve offers the agent to MCP clients as a tool named assistant that takes a
prompt: each call is a run, with the run's events sent as progress notifications, and a
cancelled call cancels the run. By default it speaks MCP on standard input and output, for a
client that starts it as a command; --http ADDR serves streamable HTTP at http://ADDR/mcp
instead, bound to loopback unless ADDR says otherwise, and then only with a bearer token
(--token or $` + envMCPToken + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.token == "" {
				f.token = getenv(envMCPToken)
			}
			return mcpServe(cmd, f, getenv)
		},
	}
	fl := serve.Flags()
	f.register(fl)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp)
	fl.StringVar(&f.broker, "broker", defaultBroker, brokerHelp)
	fl.BoolVar(&f.serve, "serve", false, "serve the agent in this process too, when --broker is shared with calf worker processes")
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on `ADDR` (such as 127.0.0.1:8808) instead of standard input and output")
	fl.StringVar(&f.token, "token", "", "require this bearer token of HTTP clients (default $"+envMCPToken+"); required when --http is not a loopback address")
	root.AddCommand(serve)
	return root
}

func mcpServe(cmd *cobra.Command, f mcpServeFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	if f.http != "" {
		host, _, err := net.SplitHostPort(f.http)
		if err != nil {
			return usageError(fmt.Errorf("--http %q: %v", f.http, err))
		}
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && f.token == "" {
			return usageError(fmt.Errorf("--http %s listens beyond loopback: give a bearer token with --token or $%s", f.http, envMCPToken))
		}
	} else if f.token != "" && cmd.Flags().Changed("token") {
		return usageError(errors.New("--token is for --http; over standard input and output the client that starts calf is trusted"))
	}
	if err := checkBroker(f.broker); err != nil {
		return err
	}
	if err := checkStore(f.store); err != nil {
		return err
	}
	serve := f.serve || adapters.InProcess(f.broker)
	a, err := newAssistant(ctx, &f.agentFlags, getenv, serve)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, f.store, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := openBroker(ctx, f.broker, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: shutdownTimeout})
	rt := w.Runtime()
	if serve {
		if err := a.Serve(ctx, rt, nil); err != nil {
			return failure(err)
		}
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	defer func() {
		stop()
		<-ran
	}()

	s := mcp.NewServer(rt, &mcp.ServerOptions{Name: "calf", Version: version,
		Instructions: "Give the assistant tool a task as its prompt; it answers when its run ends."})
	if err := s.AddRunner(runner.Agent(a)); err != nil {
		return failure(err)
	}
	if f.http == "" {
		return failure(s.ServeIO(ctx, io.NopCloser(cmd.InOrStdin()), nopWriteCloser{cmd.OutOrStdout()}))
	}
	var h http.Handler = s.Handler(nil)
	if f.token != "" {
		h = mcp.BearerToken(h, f.token)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	l, err := net.Listen("tcp", f.http)
	if err != nil {
		return failure(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.ErrOrStderr(), "calf: MCP over streamable HTTP at http://%s/mcp\n", l.Addr())
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

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
