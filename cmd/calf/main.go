package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	// The first SIGINT or SIGTERM cancels ctx: a run is cancelled, a
	// worker drains. A second one ends the process at once. Both are
	// caught on one buffered channel, so that none is lost however fast
	// they come.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "calf: interrupted again: exiting at once")
		os.Exit(exitInterrupted)
	}()
	os.Exit(Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes of [Main].
const (
	exitOK          = 0
	exitFailure     = 1   // the command ran and failed
	exitUsage       = 2   // bad arguments or configuration
	exitInterrupted = 130 // ctx ended: Ctrl-C or SIGTERM
)

// exitError is an error that decides the exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake in the arguments or the configuration.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// failure marks err, unless it is marked already, as the failure of a
// command that ran.
func failure(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitFailure, err: err}
}

// Main runs the calf command with args (without the program name), reading
// standard input from stdin and writing to stdout and stderr, and returns
// the process's exit code: 0 on success, 1 when a command fails, 2 for bad
// arguments or missing configuration, and 130 when ctx ends first
// (interrupted). Errors are printed to stderr as "calf: <error>".
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr, os.Getenv)
	root.SetArgs(args)
	tel, err := setupTelemetry(ctx, os.Getenv, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "calf:", err)
		return exitUsage
	}
	err = root.ExecuteContext(context.WithValue(ctx, telemetryKey{}, tel))
	if terr := tel.close(); terr != nil {
		fmt.Fprintln(stderr, "calf: OpenTelemetry:", terr)
	}
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "calf: interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "calf:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Errors from the command line parser: unknown commands and flags,
	// invalid flag values.
	return exitUsage
}

// newRootCommand returns the calf command with its subcommands. getenv
// reads the environment.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "calf",
		Short: "Calf runs AI agents as event handlers on a pub-sub broker",
		Long: `Calf runs AI agents as event handlers on a pub-sub broker.

With no other configuration, it runs in one process on an in-memory broker
and keeps state in a SQLite file. The only thing to bring is a model: set
OPENAI_API_KEY, or point at any OpenAI-compatible server with
OPENAI_BASE_URL or --model http://HOST:PORT/v1#MODEL.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(getenv), newWorkerCommand(getenv), newDeadLettersCommand(), newApprovalsCommand(), newRunsCommand(), newSchedulesCommand(), newWakeUpsCommand(), newMCPCommand(getenv), newA2ACommand(getenv), newServeCommand(getenv), newChatCommand(getenv), newEventsCommand(), newTraceCommand(), newPrototypesCommand(), newConversationsCommand(getenv), newReplayCommand(getenv), newEvalCommand(getenv), newVersionCommand())
	return root
}
