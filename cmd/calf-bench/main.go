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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *serve {
		return serveMock(ctx, stdin, *lifeline, stdout, w1)
	}
	if *worker != "" {
		return serveWorker(ctx, *worker, stdin, stdout)
	}
	cfg := config{runs: *runs, warmup: *warmup, mock: *mock, rounds: *rounds, stores: splitList(*stores), adapter: *adapter,
		dists: splitList(*dists), svc: services{nats: *natsURL, postgres: *postgresURL, redis: *redisURL}}
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
		return writeJSON(stdout, rep)
	}
	return writeTable(stdout, rep)
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
