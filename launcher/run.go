package launcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/runner"
)

// callFlags are the flags of run and chat.
type callFlags struct {
	agent   string
	session string
	serve   bool
}

func (f *callFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.agent, "agent", "a", "", "the agent, team or workflow to run, by `NAME` (default: the program's first)")
	fl.StringVar(&f.session, "session", "", "continue the conversation with this `ID`, kept in the store (created if new)")
	fl.BoolVar(&f.serve, "serve", false, "serve the program's agents in this process too, when --broker is shared with worker processes")
}

func (l *launch) runCommand() *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "run [flags] PROMPT...",
		Short: "Run an agent, team or workflow once on a prompt and stream its answer",
		Long: `Run an agent, team or workflow once on a prompt and stream its answer.

The words of PROMPT are joined with spaces; a PROMPT of "-" is read from
standard input. The answer is written to standard output (an agent's text as it
arrives), what the run does on the way to standard error. By default the run
happens in this process; with --broker naming a shared broker, worker processes
carry it out (--serve: this process too).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New(`run needs a prompt: run "your question"`))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := strings.Join(args, " ")
			if prompt == "-" {
				b, err := io.ReadAll(l.stdin)
				if err != nil {
					return failure(fmt.Errorf("read the prompt from standard input: %w", err))
				}
				prompt = string(b)
			}
			if strings.TrimSpace(prompt) == "" {
				return usageError(errors.New("the prompt is empty"))
			}
			return l.call(cmd.Context(), f, func(ctx context.Context, rt *agent.Runtime, rn runner.Runner) error {
				_, err := l.runOnce(ctx, rt, rn, prompt, f.session)
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}

func (l *launch) chatCommand() *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "chat [flags]",
		Short: "Chat with an agent, team or workflow in the terminal",
		Long: `Chat with an agent, team or workflow in the terminal: each line read from standard
input is a message, each answer streamed as run does. The conversation is a
session kept in the store: --session ID continues one. /exit or the end of the
input ends the chat.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return l.call(cmd.Context(), f, func(ctx context.Context, rt *agent.Runtime, rn runner.Runner) error {
				return l.chat(ctx, rt, rn, f.session)
			})
		},
	}
	f.register(cmd)
	return cmd
}

// call opens the runtime of run and chat and calls do with the runner of
// f.agent.
func (l *launch) call(ctx context.Context, f callFlags, do func(ctx context.Context, rt *agent.Runtime, rn runner.Runner) error) error {
	rs, err := l.runners()
	if err != nil {
		return err
	}
	rn, err := pick(rs, f.agent)
	if err != nil {
		return err
	}
	if err := l.checkURLs(); err != nil {
		return err
	}
	// An in-process broker reaches no worker: this process must serve.
	serve := f.serve || adapters.InProcess(l.broker)
	e, err := l.open(ctx, rs, serve, nil)
	if err != nil {
		return err
	}
	err = do(ctx, e.rt, rn)
	e.close(err != nil || ctx.Err() != nil)
	if errors.Is(err, agent.ErrNotServed) {
		err = fmt.Errorf("no worker serves %s on %s: start one (%s worker --broker %s --store %s), or add --serve to serve it in this process",
			rn.Name(), adapters.Redact(l.broker), l.cfg.Name, adapters.Redact(l.broker), adapters.Redact(l.store))
	}
	return failure(err)
}

// runOnce runs rn on prompt in session, writing the answer to stdout and
// the progress to stderr, and returns the run's result; a run that did not
// complete is an error.
func (l *launch) runOnce(ctx context.Context, rt *agent.Runtime, rn runner.Runner, prompt, session string) (*runner.Result, error) {
	streamed := false
	res, err := rn.Run(ctx, rt, prompt, &runner.Options{SessionID: session}, func(p runner.Progress) {
		if p.Delta != "" {
			streamed = true
			fmt.Fprint(l.stdout, p.Delta)
		} else if p.Message != "" {
			fmt.Fprintf(l.stderr, "· %s\n", p.Message)
		}
	})
	if err != nil {
		if streamed {
			fmt.Fprintln(l.stdout)
		}
		return nil, err
	}
	if res.Status != runner.Complete {
		if streamed {
			fmt.Fprintln(l.stdout)
		}
		if res.NotServed {
			return res, fmt.Errorf("run %s of %s %s: %w", res.RunID, rn.Name(), res.Status, agent.ErrNotServed)
		}
		return res, fmt.Errorf("run %s of %s %s: %s", res.RunID, rn.Name(), res.Status, res.Error)
	}
	if !streamed {
		fmt.Fprint(l.stdout, res.Text)
	}
	fmt.Fprintln(l.stdout)
	return res, nil
}

// chat runs rn on each line of stdin, in one session.
func (l *launch) chat(ctx context.Context, rt *agent.Runtime, rn runner.Runner, session string) error {
	if session == "" {
		session = calf.NewID()
	}
	fmt.Fprintf(l.stderr, "chatting with %s in session %s (continue it with --session %s); /exit or end of input ends\n", rn.Name(), session, session)
	lines := bufio.NewScanner(l.stdin)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for {
		fmt.Fprint(l.stderr, "> ")
		if !lines.Scan() {
			fmt.Fprintln(l.stderr)
			return lines.Err()
		}
		line := strings.TrimSpace(lines.Text())
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		}
		if _, err := l.runOnce(ctx, rt, rn, line, session); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ee *exitError
			if errors.As(err, &ee) || errors.Is(err, agent.ErrNotServed) {
				return err
			}
			// A failed run ends the turn, not the chat.
			fmt.Fprintf(l.stderr, "%s: %v\n", l.cfg.Name, err)
		}
	}
}
