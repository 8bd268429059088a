package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "calf-bench:", err)
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run is the command: it parses args, then either serves the mock or
// benchmarks and prints the report on stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calf-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 0, fmt.Sprintf("measured runs per round at each concurrency level (default %d sequentially, %d concurrently)",
		defaultRunsSequential, defaultRunsConcurrent))
	warmup := fs.Int("warmup", 0, "unmeasured runs before each round (default a tenth of -runs, at least 4 per worker)")
	levels := fs.String("concurrency", "1,64", "comma-separated concurrency levels")
	stores := fs.String("store", storeMemory, "comma-separated Calf stores to measure: memory, sqlite")
	adapter := fs.Bool("adapter", false, "also measure model/openai alone: W1's two model calls through the adapter, without broker, store or agent")
	noLocal := fs.Bool("no-local", false, "also measure, on each -store, Calf with its in-process broker hidden from the runtime as a shared one "+
		"would be (calf/STORE/nolocal): the agent's handlers then keep no copy of a run's state and read every step from the store, as "+
		"on NATS or Kafka; the difference is what the local shortcut saves")
	skeleton := fs.Bool("skeleton", false, "also measure, on each -store, the skeleton of a Calf run: W1's six events through the in-process broker, its four writes "+
		"of records encoded beforehand and its two model calls through the adapter, without the agent")
	mock := fs.String("mock", mockProcess, "where the mock runs: process (a child process), inproc, or the base URL of a running mock")
	rounds := fs.Int("rounds", defaultRounds, "rounds per concurrency level; figures are the medians")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("v", false, "print each round's figures on standard error")
	serve := fs.Bool("serve-mock", false, "only serve the W1 mock on a free loopback port, printing its base URL, until interrupted")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the benchmark (this process, not the mock's) to `file`")
	lifeline := fs.Bool("stdin-lifeline", false, "with -serve-mock: also stop when standard input closes")
	dists := fs.String("dist", "", "comma-separated distributed setups BROKER+STORE to measure as well, BROKER nats or kafka, STORE postgres or redis, as in "+setupNATSPostgres+","+setupKafkaRedis+" (default none)")
	workers := fs.String("workers", "1,2", "with -dist: comma-separated numbers of worker processes")
	natsURL := fs.String("nats", defaultNATSURL, "with -dist nats+...: the NATS server (JetStream)")
	postgresURL := fs.String("postgres", defaultPostgresURL, "with -dist ...+postgres: the PostgreSQL database")
	redisURL := fs.String("redis", defaultRedisURL, "with -dist ...+redis: the Redis database")
	worker := fs.String("worker", "", "internal: serve W1 as a worker process of a distributed setup, as the JSON `spec` says")
	delay := fs.Duration("model-delay", 0, "the model's latency: the mock answers each chat completion after this `delay`; "+
		"a positive delay measures each system for a time window (-duration) against the ideal, model-bound figures (also with -serve-mock)")
	window := fs.Duration("duration", defaultWindow, "with -model-delay: the measured window of each round")
	cold := fs.Bool("cold", false, "with -model-delay: measure cold starts instead of a window: each round starts its systems afresh "+
		"(-dist: fresh worker processes) and sends as many runs at once as the concurrency level, with no warm-up")
	runTimeout := fs.Duration("run-timeout", defaultRunTimeout, "with -model-delay: the time after which a run counts as failed (timed out)")
	serveConc := fs.Int("serve-concurrency", 0, "the runs each handler of Calf's agent works on at once (agent.ServeOptions.Concurrency); "+
		"0 means the broker's default (its Options.Concurrency: 1024 on every Calf broker)")
	partitions := fs.Int("partitions", distPartitions, "with -dist: the partitions of the brokers (they spread runs over workers; -serve-concurrency bounds the runs in flight)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *delay < 0 {
		return fmt.Errorf("%w: -model-delay must not be negative", errUsage)
	}
	if *serve {
		return serveMock(ctx, stdin, *lifeline, stdout, delayed(w1, *delay))
	}
	if *delay == 0 && (set["duration"] || set["run-timeout"] || *cold) {
		return fmt.Errorf("%w: -duration, -run-timeout and -cold go with -model-delay", errUsage)
	}
	if *delay > 0 && (set["runs"] || set["warmup"]) {
		return fmt.Errorf("%w: with -model-delay, each round measures a window (-duration), not a number of runs: -runs and -warmup do not apply", errUsage)
	}
	if *window <= 0 || *runTimeout <= 0 {
		return fmt.Errorf("%w: -duration and -run-timeout must be positive", errUsage)
	}
	if *worker != "" {
		return serveWorker(ctx, *worker, stdin, stdout)
	}
	cfg := config{runs: *runs, warmup: *warmup, mock: *mock, rounds: *rounds, stores: splitList(*stores), adapter: *adapter, skeleton: *skeleton, noLocal: *noLocal,
		dists: splitList(*dists), svc: services{nats: *natsURL, postgres: *postgresURL, redis: *redisURL}}
	if *delay > 0 {
		cfg.delay, cfg.window, cfg.runTimeout, cfg.cold = *delay, *window, *runTimeout, *cold
	}
	if *serveConc < 0 || *partitions < 1 {
		return fmt.Errorf("%w: -serve-concurrency must not be negative, -partitions must be positive", errUsage)
	}
	cfg.tuning = tuning{serveConcurrency: *serveConc, partitions: *partitions}
	for _, d := range cfg.dists {
		if err := checkSetup(d); err != nil {
			return fmt.Errorf("%w: -dist: %v", errUsage, err)
		}
	}
	for _, s := range splitList(*workers) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: -workers: %q is not a positive integer", errUsage, s)
		}
		cfg.workers = append(cfg.workers, n)
	}
	if *verbose {
		cfg.progress = stderr
	}
	for _, s := range splitList(*levels) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: -concurrency: %q is not a positive integer", errUsage, s)
		}
		cfg.levels = append(cfg.levels, n)
	}
	for _, s := range cfg.stores {
		if s != storeMemory && s != storeSQLite {
			return fmt.Errorf("%w: -store: unknown store %q: want %s or %s", errUsage, s, storeMemory, storeSQLite)
		}
	}
	if *runs < 0 || *warmup < 0 || *rounds < 1 {
		return fmt.Errorf("%w: -runs and -warmup must not be negative, -rounds must be positive", errUsage)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		return err
	}
	if n, systems := failures(rep); n > 0 {
		return fmt.Errorf("%w: %s (%s), counted in the report", errRunsFailed, plural(n, "run"), strings.Join(systems, ", "))
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
