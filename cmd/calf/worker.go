package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/schedule"
)

// docmemPrototype is the name of the code prototype that calf worker
// --agents serves with package conversation/docmem.
const docmemPrototype = "docmem-agent"

// workerAgents are the agents calf worker can serve, by name.
var workerAgents = []string{agentName}

// workerFlags are the flags of calf worker.
type workerFlags struct {
	agentFlags
	broker      string
	store       string
	agents      []string
	concurrency int
	maxAttempts int
	drain       time.Duration
	retention   time.Duration
	quiet       bool
	record      bool
}

// defaultRetention is how long calf worker keeps the runs that ended.
const defaultRetention = 7 * 24 * time.Hour

func newWorkerCommand(getenv func(string) string) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker --broker URL [flags]",
		Short: "Serve agents' handlers on a shared broker until stopped",
		Long: `Serve agents' handlers on a shared broker until stopped.

A worker joins the broker's consumer groups of the agents named by --agent
(by default "assistant", the agent calf run runs) and carries out their
runs, keeping state in --store. Start as many workers as the load needs:
they share the messages. Runs are started by calf run --broker URL (or by
any program on the same broker) from anywhere.

With --agents FILE it serves the llm prototypes of a prototypes file as
agents instead, registers the file's prototypes in --store, and serves
conversations (calf conversations create makes them).

Messages parked on the dead-letter channel are recorded in the store for
calf deadletters.

SIGINT or SIGTERM drains the worker: it takes no new message, lets the
handlers in progress finish (up to --drain), leaves every message it has
not handled to the other workers, and exits with status 0. A second
signal exits at once.`,
		Example: `  calf worker --broker nats://127.0.0.1:4222 --store postgres://calf@db:5432/calf --model openai:gpt-4o-mini
  calf worker --broker kafka://k1:9092,k2:9092 --store redis://cache:6379/0 --read /srv/docs
  calf worker --broker nats://127.0.0.1:4222 --store postgres://calf@db:5432/calf --agents agents.yaml --root /srv/data`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), f, cmd.Flags().Changed("agent"), getenv, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	f.registerAgents(fl, false)
	fl.StringVar(&f.broker, "broker", "", brokerHelp+" (required; one other processes reach)")
	fl.StringVar(&f.store, "store", defaultStore, storeHelp+"; every worker and caller must use the same one")
	fl.StringSliceVar(&f.agents, "agent", []string{agentName}, "serve the agent named `NAME` (repeat, or separate with commas); known: "+strings.Join(workerAgents, ", ")+
		"; with --agents, the file's llm prototypes (default: all of them)")
	fl.IntVar(&f.concurrency, "concurrency", agent.DefaultWorkerConcurrency, "bound on the model and tool calls this worker makes at once, across its agents: the runs it works on at once (the broker's partitions do not bound it)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "deliveries of a failing message before it is parked on the dead-letter channel (default: the broker's, 5)")
	fl.DurationVar(&f.drain, "drain", agent.DefaultDrainTimeout, "on SIGINT or SIGTERM, how long the handlers in progress may take to finish")
	fl.BoolVar(&f.record, "record", false, "record the events of the runs in the store (their event logs), for calf trace and event streams")
	fl.DurationVar(&f.retention, "retention", defaultRetention, "remove the runs that ended longer ago than this, with their tool results, approvals and event logs, checked every hour (sessions are kept; 0 keeps every run)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "log only warnings and errors")
	return cmd
}

// runWorker is calf worker. agentSet says whether --agent was given.
func runWorker(ctx context.Context, f workerFlags, agentSet bool, getenv func(string) string, stderr io.Writer) error {
	if f.broker == "" {
		return usageError(errors.New("calf worker needs --broker: the URL of a broker the callers reach, such as nats://127.0.0.1:4222 or kafka://127.0.0.1:9092"))
	}
	if err := checkBroker(f.broker); err != nil {
		return err
	}
	if adapters.InProcess(f.broker) {
		return usageError(fmt.Errorf("--broker %s is reachable only from inside this process, so no caller could reach the worker: use nats:// or kafka://", adapters.Redact(f.broker)))
	}
	if err := checkStore(f.store); err != nil {
		return err
	}
	if scheme, _, _ := strings.Cut(f.store, ":"); scheme == "memory" {
		return usageError(fmt.Errorf("--store %s keeps state inside this process, where no other worker or caller can read it: "+
			"use postgres://, redis://, or sqlite:PATH for processes on one machine", f.store))
	}
	known := workerAgents
	var protos []conversation.Prototype
	if f.agentsFile != "" {
		if err := f.check(); err != nil {
			return err
		}
		var err error
		if protos, err = f.loadAgents(); err != nil {
			return err
		}
		known = llmNames(protos)
		if !agentSet {
			f.agents = known
		}
	}
	for _, name := range f.agents {
		if !slices.Contains(known, name) {
			return usageError(fmt.Errorf("--agent %q: unknown agent; known: %s", name, strings.Join(known, ", ")))
		}
	}
	if f.concurrency < 0 || f.maxAttempts < 0 {
		return usageError(errors.New("--concurrency and --max-attempts must not be negative"))
	}
	if err := checkRetention(f.retention); err != nil {
		return err
	}
	if f.drain <= 0 {
		return usageError(fmt.Errorf("--drain must be positive, got %s", f.drain))
	}
	if err := f.check(); err != nil {
		return err
	}
	level := slog.LevelInfo
	if f.quiet {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	st, err := openStore(ctx, f.store, log)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := openBroker(ctx, f.broker, log)
	if err != nil {
		return err
	}
	defer b.Close()
	// The agents after the broker and the store: a broker or a store that
	// cannot be reached is what to fix first, not the model.
	var agents []*agent.Agent[string]
	for _, name := range f.agents {
		var a *agent.Agent[string]
		if protos == nil {
			a, err = newAssistant(ctx, &f.agentFlags, getenv, true)
		} else {
			p, _ := pickPrototype(protos, name)
			a, err = f.prototypeAgent(context.WithoutCancel(ctx), p, getenv, true)
		}
		if err != nil {
			return err
		}
		agents = append(agents, a)
	}

	w := agent.NewWorker(b, st, &agent.WorkerOptions{Client: &calf.Options{Name: calf.ProcessName()}, Logger: log, DrainTimeout: f.drain, Concurrency: f.concurrency, Retention: f.retention, Runtime: runtimeOptions(ctx)})
	// Until the worker runs, a failure shuts its client down here: the
	// handlers and the timer loop served so far stop before the store
	// and the broker close.
	running := false
	defer func() {
		if !running {
			_ = w.Runtime().Client().Close()
		}
	}()
	// The event logs that calf serve records go with the runs.
	w.Runtime().AddSweeper("eventlog", eventlog.Sweep)
	// The subscriptions outlive ctx: the worker drains them when it ends.
	sctx := context.WithoutCancel(ctx)
	for _, a := range agents {
		if err := a.Serve(sctx, w.Runtime(), &agent.ServeOptions{Concurrency: f.concurrency, MaxAttempts: f.maxAttempts}); err != nil {
			return failure(err)
		}
	}
	if protos != nil {
		// The conversations of the file's prototypes: registered (the
		// file's version replacing the store's), then served.
		host, err := f.newHost(ctx, w.Runtime(), protos, getenv, host.Options{
			DeleteChannels: true, Concurrency: f.concurrency, MaxAttempts: f.maxAttempts,
		})
		if err != nil {
			return err
		}
		if err := serveHost(sctx, host, false, stderr); err != nil {
			return err
		}
	}
	// The schedules of the store (calf schedules), with those of the
	// served prototypes: each firing carried out by one of the workers.
	sched := schedule.New(w.Runtime(), nil)
	for _, name := range f.agents {
		if protos == nil {
			break
		}
		if p, err := pickPrototype(protos, name); err == nil && p.Schedule != nil {
			if err := putPrototypeSchedule(ctx, sched, p); err != nil {
				return err
			}
		}
	}
	if err := sched.Serve(sctx); err != nil {
		return failure(err)
	}
	if f.record {
		if err := eventlog.New(w.Runtime().Client(), st).Record(sctx, nil); err != nil {
			return failure(err)
		}
	}
	if err := w.Start(sctx); err != nil {
		return failure(err)
	}
	log.Info("calf worker: serving", "agents", strings.Join(f.agents, ","), "conversations", protos != nil, "broker", adapters.Redact(f.broker), "store", adapters.Redact(f.store))
	running = true
	return failure(w.Run(ctx))
}

// putPrototypeSchedule registers the schedule of the prototype p, named
// after it: added when the store has none of that name, replaced when
// the store's is another (its history starts again), left alone when it
// is the same.
func putPrototypeSchedule(ctx context.Context, sched *schedule.Scheduler, p conversation.Prototype) error {
	ps := p.Schedule
	spec := schedule.Spec{Name: p.Name, Kind: "agent", Runner: p.Name, Prompt: ps.Prompt, Cron: ps.Cron, TimeZone: ps.TimeZone,
		Overlap: schedule.Overlap(ps.Overlap), CatchUp: schedule.CatchUp(ps.CatchUp)}
	if ps.Every != "" {
		d, err := time.ParseDuration(ps.Every)
		if err != nil {
			return usageError(fmt.Errorf("prototype %s: schedule: every %q: %v", p.Name, ps.Every, err))
		}
		spec.Every = d
	}
	if err := spec.Validate(); err != nil {
		return usageError(fmt.Errorf("prototype %s: %w", p.Name, err))
	}
	cur, err := sched.Get(ctx, p.Name)
	switch {
	case err == nil && reflect.DeepEqual(cur.Spec, spec):
		return nil
	case err == nil:
		if err := sched.Delete(ctx, p.Name); err != nil {
			return failure(err)
		}
	case !errors.Is(err, schedule.ErrNotFound):
		return failure(err)
	}
	if _, err := sched.Add(ctx, spec); err != nil && !errors.Is(err, schedule.ErrExists) { // another worker added it first
		return failure(err)
	}
	return nil
}
