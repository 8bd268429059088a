package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/spf13/cobra"

	"github.com/calf-go/calf/a2a"
	"github.com/calf-go/calf/runner"
)

// envA2AToken holds the bearer token of calf a2a serve and calf a2a send,
// as --token does.
const envA2AToken = "CALF_A2A_TOKEN"

func newA2ACommand(getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "a2a",
		Short: "Talk A2A: offer the agent to A2A clients, or send to an A2A agent",
		Args:  cobra.NoArgs,
	}
	root.AddCommand(newA2AServeCommand(getenv), newA2ASendCommand(getenv))
	return root
}

type a2aServeFlags struct {
	edgeFlags
	addr, url string
}

func newA2AServeCommand(getenv func(string) string) *cobra.Command {
	var f a2aServeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent as an A2A 1.0 agent, over JSON-RPC and REST",
		Long: `calf a2a serve offers the agent to A2A clients: its card at /.well-known/agent-card.json,
JSON-RPC and REST at the base URL. Each task is a Calf run kept in --store: with a shared
broker and store, the task goes on in calf worker processes if this one stops, and a server
started again reports it. It listens on loopback unless --addr says otherwise, and then only
with a bearer token (--token or $` + envA2AToken + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.token == "" {
				f.token = getenv(envA2AToken)
			}
			return a2aServe(cmd, f, getenv)
		},
	}
	fl := cmd.Flags()
	f.edgeFlags.register(fl)
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8809", "listen on `ADDR`")
	fl.StringVar(&f.url, "url", "", "the base URL clients reach the server at, for the agent card (default http://ADDR)")
	fl.StringVar(&f.token, "token", "", "require this bearer token (default $"+envA2AToken+"); required when --addr is not a loopback address")
	return cmd
}

func a2aServe(cmd *cobra.Command, f a2aServeFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	if err := checkListen("addr", f.addr, f.token, envA2AToken); err != nil {
		return err
	}
	e, err := openEdge(ctx, &f.edgeFlags, getenv)
	if err != nil {
		return err
	}
	defer e.close()
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		return failure(err)
	}
	url := f.url
	if url == "" {
		url = "http://" + l.Addr().String()
	}
	s := a2a.NewServer(e.rt, runner.Agent(e.agent), &a2a.ServerOptions{URL: url, Token: f.token, Version: version})
	fmt.Fprintf(cmd.ErrOrStderr(), "calf: A2A agent %s at %s (card at %s/.well-known/agent-card.json)\n", e.agent.Name(), url, url)
	return serveHTTP(ctx, l, s)
}

func newA2ASendCommand(getenv func(string) string) *cobra.Command {
	var token string
	var noStream bool
	var contextID string
	cmd := &cobra.Command{
		Use:   "send URL TEXT",
		Short: "Send a message to an A2A agent and print its answer",
		Long: `calf a2a send reads the agent card at URL (a base URL, or the card's own URL), sends TEXT,
shows the task's progress on standard error as it streams, and prints the answer on standard
output. It exits 1 when the task fails, is rejected or cancelled.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = getenv(envA2AToken)
			}
			return a2aSend(cmd.Context(), args[0], strings.Join(args[1:], " "), token, contextID, noStream, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "bearer token (default $"+envA2AToken+")")
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "wait for the answer instead of streaming")
	cmd.Flags().StringVar(&contextID, "context", "", "continue the conversation with this context id")
	return cmd
}

func a2aSend(ctx context.Context, url, text, token, contextID string, noStream bool, stdout, stderr io.Writer) error {
	client, card, err := a2a.Connect(ctx, url, &a2a.RemoteOptions{Token: token})
	if err != nil {
		return failure(err)
	}
	defer client.Destroy()
	msg := spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(text))
	msg.ContextID = contextID
	req := &spec.SendMessageRequest{Message: msg}
	var answer strings.Builder
	var state spec.TaskState
	var note string
	apply := func(ev spec.Event) {
		switch e := ev.(type) {
		case *spec.Message:
			answer.WriteString(a2a.PartsText(e.Parts))
			state = spec.TaskStateCompleted
		case *spec.Task:
			state = e.Status.State
			if e.Status.Message != nil {
				note = a2a.PartsText(e.Status.Message.Parts)
			}
			if len(e.Artifacts) > 0 {
				answer.Reset()
				for _, a := range e.Artifacts {
					answer.WriteString(a2a.PartsText(a.Parts))
				}
			}
		case *spec.TaskStatusUpdateEvent:
			state = e.Status.State
			if e.Status.Message != nil {
				note = a2a.PartsText(e.Status.Message.Parts)
				fmt.Fprintf(stderr, "· %s: %s\n", stateName(state), note)
			} else {
				fmt.Fprintf(stderr, "· %s\n", stateName(state))
			}
		case *spec.TaskArtifactUpdateEvent:
			if !e.Append {
				answer.Reset()
			}
			answer.WriteString(a2a.PartsText(e.Artifact.Parts))
		}
	}
	if noStream || !card.Capabilities.Streaming {
		res, err := client.SendMessage(ctx, req)
		if err != nil {
			return failure(fmt.Errorf("a2a: %s: %w", card.Name, err))
		}
		apply(res)
	} else {
		for ev, err := range client.SendStreamingMessage(ctx, req) {
			if err != nil {
				return failure(fmt.Errorf("a2a: %s: %w", card.Name, err))
			}
			apply(ev)
		}
	}
	switch state {
	case spec.TaskStateCompleted:
		out := answer.String()
		if out == "" {
			out = note
		}
		fmt.Fprintln(stdout, out)
		return nil
	case spec.TaskStateInputRequired, spec.TaskStateAuthRequired:
		fmt.Fprintln(stdout, note)
		return nil
	}
	return failure(fmt.Errorf("a2a: %s: the task ended %s: %s", card.Name, stateName(state), note))
}

func stateName(s spec.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}
