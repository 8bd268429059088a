package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// Defaults of the flags.
const (
	// DefaultBroker is --broker's default: the in-memory broker of this
	// process.
	DefaultBroker = "memory://"
	// DefaultStore is --store's default: SQLite in the default file
	// (store/sqlite.DefaultPath), as the calf command has.
	DefaultStore = "sqlite:"
	// DefaultModel is --model's default, when [Config.Model] is set.
	DefaultModel = "openai:gpt-4o-mini"
)

// Exit codes of [Run].
const (
	ExitOK          = 0   // success
	ExitFailure     = 1   // the command ran and failed (a run that failed)
	ExitUsage       = 2   // bad arguments or configuration
	ExitInterrupted = 130 // ctx ended first: Ctrl-C or SIGTERM
)

// shutdownTimeout bounds the wait for the handlers in progress when a
// command ends.
const shutdownTimeout = 5 * time.Second

// Config is what a program gives the launcher: its agents, teams and
// workflows, and the defaults of its flags. A zero field has the default
// its comment says.
type Config struct {
	// Name is the program's name in its help and its messages. Default:
	// the base name of os.Args[0].
	Name string
	// Runners are the program's agents, teams and workflows
	// ([runner.Agent], [runner.Team], [runner.Workflow]); the first is the
	// one run and chat use unless --agent names another. Their names
	// must be distinct. Ignored when Model is set.
	Runners []runner.Runner
	// Model, when set, makes the runners with the model that --model
	// names (opened by package model/models from the environment:
	// OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), in place of Runners: a
	// program whose agents take their model from the command line.
	Model func(m model.Model) ([]runner.Runner, error)
	// DefaultModel is --model's default. Default: [DefaultModel].
	DefaultModel string
	// Broker and Store are the defaults of --broker and --store.
	// Defaults: [DefaultBroker] and [DefaultStore].
	Broker, Store string
	// Addr is serve's --addr default. Default: server.DefaultAddr
	// (loopback).
	Addr string
}

// Main runs the program's command line (os.Args) with cfg and exits with
// [Run]'s status. The first SIGINT or SIGTERM cancels ctx (a run is
// cancelled, a server or a worker stops); a second one exits at once.
func Main(ctx context.Context, cfg *Config) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		os.Exit(ExitInterrupted)
	}()
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cfg)
	cancel()
	os.Exit(code)
}

// Run runs the command line args (without the program's name) with cfg,
// reading standard input from stdin and writing to stdout and stderr, and
// returns the exit code: [ExitOK], [ExitFailure] when a command or a run
// fails, [ExitUsage] for bad arguments or configuration, and
// [ExitInterrupted] when ctx ends first. Errors are printed to stderr as
// "NAME: error".
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, cfg *Config) int {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Name == "" {
		c.Name = filepath.Base(os.Args[0])
	}
	if c.DefaultModel == "" {
		c.DefaultModel = DefaultModel
	}
	if c.Broker == "" {
		c.Broker = DefaultBroker
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.Addr == "" {
		c.Addr = server.DefaultAddr
	}
	l := &launch{cfg: c, stdin: stdin, stdout: stdout, stderr: stderr}
	root := l.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "%s: interrupted\n", c.Name)
		return ExitInterrupted
	}
	fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitUsage // the command line parser's errors
}

// exitError is an error that decides the exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake in the arguments or configuration.
func usageError(err error) error { return &exitError{code: ExitUsage, err: err} }

// failure marks err, unless it is marked already, as a failure.
func failure(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: ExitFailure, err: err}
}

// launch is one command line's state.
type launch struct {
	cfg            Config
	stdin          io.Reader
	stdout, stderr io.Writer
	// modelSpec is --model, when cfg.Model is set.
	modelSpec string
	// broker and store are --broker and --store.
	broker, store string
}

// runners returns the program's runners: cfg.Runners, or those
// cfg.Model makes with the model of --model.
func (l *launch) runners() ([]runner.Runner, error) {
	rs := l.cfg.Runners
	if l.cfg.Model != nil {
		m, err := models.Open(l.modelSpec, nil)
		if err != nil {
			if errors.Is(err, model.ErrNoModel) {
				return nil, usageError(fmt.Errorf("--model %s: %w", l.modelSpec, err))
			}
			return nil, usageError(fmt.Errorf("--model: %w", err))
		}
		if rs, err = l.cfg.Model(m); err != nil {
			return nil, failure(err)
		}
	}
	if len(rs) == 0 {
		return nil, usageError(errors.New("the program has no agents, teams or workflows (launcher.Config.Runners)"))
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if r == nil || r.Name() == "" {
			return nil, usageError(errors.New("a runner of launcher.Config.Runners is nil or has no name"))
		}
		if seen[r.Name()] {
			return nil, usageError(fmt.Errorf("two runners are named %q", r.Name()))
		}
		seen[r.Name()] = true
	}
	return rs, nil
}

// pick returns the runner of rs named name, or the first with "".
func pick(rs []runner.Runner, name string) (runner.Runner, error) {
	if name == "" {
		return rs[0], nil
	}
	i := slices.IndexFunc(rs, func(r runner.Runner) bool { return r.Name() == name })
	if i < 0 {
		return nil, usageError(fmt.Errorf("--agent %q: no such agent, team or workflow; known: %s", name, strings.Join(names(rs), ", ")))
	}
	return rs[i], nil
}

func names(rs []runner.Runner) []string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Name())
	}
	return ns
}

func (l *launch) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   l.cfg.Name,
		Short: l.cfg.Name + " runs its agents, teams and workflows on Calf",
		Long: l.cfg.Name + ` runs its agents, teams and workflows on Calf: once on a prompt (run), in a
terminal chat (chat), over HTTP with a web chat and a run inspector (serve), or
as a worker on a shared broker (worker).

With no other configuration it runs in one process on an in-memory broker and
keeps state in a SQLite file. Growing past one machine changes URLs, not code:
--broker nats://... or kafka://..., --store postgres://... or redis://..., and
worker processes.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(l.stdin)
	root.SetOut(l.stdout)
	root.SetErr(l.stderr)
	fl := root.PersistentFlags()
	fl.StringVar(&l.broker, "broker", l.cfg.Broker, "the broker: memory:// (in this process), nats://HOST:PORT, nats+embedded://DIR, kafka://HOST:PORT")
	fl.StringVar(&l.store, "store", l.cfg.Store, "where state lives: sqlite:PATH (empty PATH: the default file), memory:, postgres://..., redis://...")
	if l.cfg.Model != nil {
		fl.StringVar(&l.modelSpec, "model", l.cfg.DefaultModel, "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME, or URL#NAME")
	}
	root.AddCommand(l.runCommand(), l.chatCommand(), l.serveCommand(), l.workerCommand())
	return root
}
