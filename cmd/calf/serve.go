package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/tool/builtin"
)

// envServeToken holds the bearer tokens of calf serve, as --token does:
// entries of TOKEN or USER:TOKEN, separated by commas.
const envServeToken = "CALF_SERVE_TOKEN"

type serveFlags struct {
	edgeFlags
	addr   string
	tokens []string
}

func newServeCommand(getenv func(string) string) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent over HTTP: the OpenAI-compatible API",
		Long: `calf serve offers the agent over HTTP. Any OpenAI client talks to it with the agent's name
as the model, at http://ADDR/v1: GET /v1/models, POST /v1/chat/completions and
POST /v1/responses, streaming or not. A request is stateless, its messages being the
conversation, unless it carries a Calf-Session-Id header: the run then continues that
session. Runs are kept in --store; with a shared broker they run in calf worker processes.
A web chat is at http://ADDR/ and the run inspector at http://ADDR/inspect.html.
With --agents FILE the file's conversations are offered too, at /v1/conversations and in
the web chat: the file's prototypes are registered in --store and, on the in-process
broker or with --serve, served here; otherwise calf worker --agents processes serve them.

It listens on loopback unless --addr says otherwise, and then only with bearer tokens
(--token, or $` + envServeToken + `, whose entries are separated by commas). A token is
TOKEN (user "default") or USER:TOKEN; a session belongs to the user who started it.
With the tokens of several users, the file and bash tools of each user's runs work in a
directory of that user's own, DIR/users/NAME beneath --read, --edit or --bash (made on first
use, readable by this system user only), and --bash needs bubblewrap.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.tokens) == 0 {
				if env := getenv(envServeToken); env != "" {
					f.tokens = strings.Split(env, ",")
				}
			}
			return serve(cmd, f, getenv)
		},
	}
	fl := cmd.Flags()
	f.edgeFlags.register(fl)
	fl.StringVar(&f.addr, "addr", server.DefaultAddr, "listen on `ADDR`")
	fl.DurationVar(&f.retention, "retention", defaultRetention, "remove the runs that ended longer ago than this, with their tool results, approvals and event logs, checked every hour (sessions are kept; 0 keeps every run)")
	fl.StringArrayVar(&f.tokens, "token", nil, "require a bearer `TOKEN` or USER:TOKEN (repeat for more users; default $"+envServeToken+"); required when --addr is not a loopback address")
	return cmd
}

// parseTokens turns TOKEN and USER:TOKEN entries into a token → user map
// (server.ParseTokens); a malformed entry is a usage error.
func parseTokens(entries []string) (map[string]string, error) {
	tokens, err := server.ParseTokens(entries)
	if err != nil {
		return nil, usageError(fmt.Errorf("--token: %w", err))
	}
	return tokens, nil
}

// checkAddr refuses an --addr that is not HOST:PORT.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return usageError(fmt.Errorf("--addr %q is not a valid address: %v (give HOST:PORT, such as %s)", addr, err, server.DefaultAddr))
	}
	return nil
}

// severalUsers reports whether tokens authenticate more than one user.
func severalUsers(tokens map[string]string) bool {
	var first string
	for _, u := range tokens {
		if first == "" {
			first = u
		} else if u != first {
			return true
		}
	}
	return false
}

func serve(cmd *cobra.Command, f serveFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	tokens, err := parseTokens(f.tokens)
	if err != nil {
		return err
	}
	if err := checkRetention(f.retention); err != nil {
		return err
	}
	if err := checkToolDirs(f.store, &f.agentFlags); err != nil {
		return err
	}
	if err := checkAddr(f.addr); err != nil {
		return err
	}
	if err := server.CheckAddr(f.addr, tokens); err != nil {
		return usageError(fmt.Errorf("--addr %s listens beyond loopback: give bearer tokens with --token or $%s", f.addr, envServeToken))
	}
	if severalUsers(tokens) && f.agentsFile != "" && f.root != "" {
		// The prototypes' tools are made on --root alone: every user's
		// runs and conversations would share it.
		return usageError(fmt.Errorf("--root %s with the tokens of several users: the --agents prototypes' file tools and bash would share it among the users, "+
			"whose files would be each other's; serve one user, or serve the prototypes without tools that need --root", f.root))
	}
	if severalUsers(tokens) && f.bash != "" && (f.serve || adapters.InProcess(f.broker)) {
		// A command run without a sandbox reaches every user's directory.
		sh, err := builtin.Bash(f.bash, nil)
		if err != nil {
			return usageError(fmt.Errorf("--bash: %w", err))
		}
		if !sh.Sandboxed() {
			return usageError(fmt.Errorf("--bash with the tokens of several users needs the bubblewrap sandbox, which keeps each user's commands in a directory of their own (%s): install bubblewrap (bwrap), or serve one user", filepath.Join(f.bash, userRootsDir, "USER")))
		}
	}
	// The event log of the runs, for their event streams: recorded by the
	// edge, its logs removed with the runs by the retention sweep.
	f.record = true
	e, err := openEdge(ctx, &f.edgeFlags, getenv)
	if err != nil {
		return err
	}
	defer e.close()
	// With --agents, the file's conversations too: its prototypes
	// registered and a host, served here when the agent is.
	var convHost *host.Host
	if f.agentsFile != "" {
		protos, err := f.loadAgents()
		if err != nil {
			return err
		}
		if convHost, err = f.newHost(ctx, e.rt, protos, getenv, host.Options{DeleteChannels: true}); err != nil {
			return err
		}
	}
	opts := &server.Options{Addr: f.addr, Tokens: tokens, Log: e.log, Conversations: convHost}
	if severalUsers(tokens) {
		// Each user's runs carry the user, so that the tools work in a
		// directory of the user's own (userRoot).
		opts.Deps = func(user string) agent.DepsValue { return runUsers.Value(runUser{User: user}) }
	}
	s, err := server.New(e.rt, []runner.Runner{runner.Agent(e.agent)}, opts)
	if err != nil {
		return failure(err)
	}
	if convHost != nil {
		// The recorder first, so that the answers of the messages
		// carried on are in the histories.
		if err := s.RecordConversations(context.WithoutCancel(ctx)); err != nil {
			return failure(err)
		}
		if f.serve || adapters.InProcess(f.broker) {
			if err := serveHost(ctx, convHost, adapters.InProcess(f.broker), cmd.ErrOrStderr()); err != nil {
				return err
			}
		}
	}
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		return failure(err)
	}
	base := "http://" + l.Addr().String()
	fmt.Fprintf(cmd.ErrOrStderr(), "calf: serving agent %s at %s/v1 (OpenAI-compatible; model %q)\n", e.agent.Name(), base, e.agent.Name())
	fmt.Fprintf(cmd.ErrOrStderr(), "calf: web chat at %s/\ncalf: run inspector at %s/inspect.html\n", base, base)
	if convHost != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "calf: conversations of the --agents prototypes at %s/v1/conversations\n", base)
	}
	if err := s.Serve(ctx, l); err != nil {
		return failure(err)
	}
	return nil
}
