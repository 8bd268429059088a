package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/runner"
)

// envMCPToken is the environment variable that holds calf mcp serve's
// bearer token, as --token does.
const envMCPToken = "CALF_MCP_TOKEN"

type mcpServeFlags struct {
	edgeFlags
	http string
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
	f.edgeFlags.register(fl)
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on `ADDR` (such as 127.0.0.1:8808) instead of standard input and output")
	fl.StringVar(&f.token, "token", "", "require this bearer token of HTTP clients (default $"+envMCPToken+"); required when --http is not a loopback address")
	root.AddCommand(serve)
	return root
}

func mcpServe(cmd *cobra.Command, f mcpServeFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	if f.http != "" {
		if err := checkListen("http", f.http, f.token, envMCPToken); err != nil {
			return err
		}
	} else if f.token != "" && cmd.Flags().Changed("token") {
		return usageError(errors.New("--token is for --http; over standard input and output the client that starts calf is trusted"))
	}
	e, err := openEdge(ctx, &f.edgeFlags, getenv)
	if err != nil {
		return err
	}
	defer e.close()
	s := mcp.NewServer(e.rt, &mcp.ServerOptions{Name: "calf", Version: version,
		Instructions: "Give the " + e.agent.Name() + " tool a task as its prompt; it answers when its run ends."})
	if err := s.AddRunner(runner.Agent(e.agent)); err != nil {
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
	fmt.Fprintf(cmd.ErrOrStderr(), "calf: MCP over streamable HTTP at http://%s/mcp\n", l.Addr())
	return serveHTTP(ctx, l, mux)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
