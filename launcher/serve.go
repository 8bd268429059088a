package launcher

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/server"
)

// EnvServeToken holds serve's bearer tokens when --token is not given:
// entries of TOKEN or USER:TOKEN separated by commas, as calf serve's
// CALF_SERVE_TOKEN.
const EnvServeToken = "CALF_SERVE_TOKEN"

func (l *launch) serveCommand() *cobra.Command {
	var addr string
	var tokens []string
	var serveHere bool
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve the agents, teams and workflows over HTTP, with a web chat and a run inspector",
		Long: `Serve the program's agents, teams and workflows over HTTP: the OpenAI-compatible API at
http://ADDR/v1 (each one a model, by its name), the web chat at http://ADDR/ and
the run inspector at http://ADDR/inspect.html, with the event log they read
recorded in --store.

It listens on loopback unless --addr says otherwise, and then only with bearer
tokens (--token, or $` + EnvServeToken + `): TOKEN (user "default") or USER:TOKEN,
at least 16 characters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if len(tokens) == 0 {
				if env := os.Getenv(EnvServeToken); env != "" {
					tokens = strings.Split(env, ",")
				}
			}
			toks, err := server.ParseTokens(tokens)
			if err != nil {
				return usageError(fmt.Errorf("--token: %w", err))
			}
			if err := server.CheckAddr(addr, toks); err != nil {
				return usageError(fmt.Errorf("--addr %s listens beyond loopback: give bearer tokens with --token or $%s", addr, EnvServeToken))
			}
			rs, err := l.runners()
			if err != nil {
				return err
			}
			if err := l.checkURLs(); err != nil {
				return err
			}
			e, err := l.open(ctx, rs, serveHere || adapters.InProcess(l.broker), nil)
			if err != nil {
				return err
			}
			defer e.close(false)
			// The server records the event log of the runs, which the web
			// chat and the inspector read.
			s, err := server.New(e.rt, rs, &server.Options{Addr: addr, Tokens: toks})
			if err != nil {
				return failure(err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return failure(err)
			}
			base := "http://" + ln.Addr().String()
			fmt.Fprintf(l.stderr, "%s: serving %s at %s/v1 (OpenAI-compatible; each one a model)\n", l.cfg.Name, strings.Join(names(rs), ", "), base)
			fmt.Fprintf(l.stderr, "%s: web chat at %s/\n%s: run inspector at %s/inspect.html\n", l.cfg.Name, base, l.cfg.Name, base)
			return failure(s.Serve(ctx, ln))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", l.cfg.Addr, "listen on `ADDR`")
	fl.StringArrayVar(&tokens, "token", nil, "require a bearer `TOKEN` or USER:TOKEN (repeat for more users; default $"+EnvServeToken+"); required when --addr is not a loopback address")
	fl.BoolVar(&serveHere, "serve", false, "serve the program's agents in this process too, when --broker is shared with worker processes")
	return cmd
}

func (l *launch) workerCommand() *cobra.Command {
	var concurrency int
	cmd := &cobra.Command{
		Use:   "worker --broker URL [flags]",
		Short: "Serve the agents, teams and workflows on a shared broker until stopped",
		Long: `Serve the program's agents, teams and workflows on a shared broker (--broker nats://...
or kafka://...) with state in a shared store (--store postgres://..., redis://..., or
sqlite:PATH for processes on one machine) until SIGINT or SIGTERM, which drains
it. Start as many as the load needs; run, chat and serve with the same --broker
and --store start runs that the workers carry out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := l.checkURLs(); err != nil {
				return err
			}
			if err := l.shared(); err != nil {
				return err
			}
			if concurrency < 0 {
				return usageError(fmt.Errorf("--concurrency must not be negative, got %d", concurrency))
			}
			rs, err := l.runners()
			if err != nil {
				return err
			}
			e, err := l.open(ctx, rs, true, &agent.WorkerOptions{Concurrency: concurrency, DrainTimeout: agent.DefaultDrainTimeout})
			if err != nil {
				return err
			}
			fmt.Fprintf(l.stderr, "%s: worker serving %s on %s, store %s\n", l.cfg.Name, strings.Join(names(rs), ", "), adapters.Redact(l.broker), adapters.Redact(l.store))
			<-ctx.Done()
			// Stopped: drain, then exit 0.
			e.close(false)
			return nil
		},
	}
	cmd.Flags().IntVar(&concurrency, "concurrency", agent.DefaultWorkerConcurrency, "bound on the model and tool calls this worker makes at once")
	return cmd
}
