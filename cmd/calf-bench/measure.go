package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf/model/modeltest"
)

// Errors of a benchmark.
var (
	// errWrongOutput reports a run whose result is not W1's.
	errWrongOutput = errors.New("calf-bench: wrong output")
	// errUsage reports flags that do not make sense.
	errUsage = errors.New("usage")
)

// Defaults of a benchmark.
const (
	defaultRunsSequential = 2000
	defaultRunsConcurrent = 20000
	defaultRounds         = 3
	systemFloor           = "floor"
)

// config is what one benchmark measures.
type config struct {
	// runs is the number of measured runs per round; 0 means
	// defaultRunsSequential at concurrency 1 and defaultRunsConcurrent
	// above.
	runs int
	// warmup is the number of unmeasured runs before each round; 0 means
	// a tenth of runs, and at least four per concurrent worker.
	warmup int
	// levels are the concurrency levels, in order.
	levels []int
	// stores are the Calf stores to measure, each next to the floor.
	stores []string
	// adapter adds the measurement of model/openai alone (systemAdapter).
	adapter bool
	// skeleton adds, for each store, the measurement of the skeleton of a
	// Calf run (skeletonStack).
	skeleton bool
	// noLocal adds, for each store, Calf with the broker hidden from the
	// runtime as a shared one (noLocalSuffix).
	noLocal bool
	// dists are the distributed setups to measure (setupNATSPostgres,
	// setupKafkaRedis), each with every number of worker processes in
	// workers, on the services in svc.
	dists   []string
	workers []int
	svc     services
	// tuning changes Calf's defaults (-serve-concurrency, -partitions).
	tuning tuning
	// workerStderr receives the worker processes' standard error.
	workerStderr io.Writer
	// mock is where the mock runs: mockProcess, mockInproc or a base URL.
	mock   string
	rounds int
	// handler answers the mock's requests: w1, unless a test changes it.
	handler modeltest.ServerHandler
	// progress, when set, receives a line per measured round.
	progress io.Writer
	// delay, when positive, is the mock's latency per chat completion
	// (-model-delay), and turns on the model-latency mode: each round
	// measures a time window of window, each run bounded by runTimeout
	// (measureWindow), instead of a number of runs.
	delay      time.Duration
	window     time.Duration
	runTimeout time.Duration
	// cold, with a delay, measures a burst instead of a window: as many
	// runs at once as the concurrency level, on a system just started
	// (measureBurst).
	cold bool
}

func (c *config) runsAt(conc int) int {
	switch {
	case c.runs > 0:
		return c.runs
	case conc == 1:
		return defaultRunsSequential
	default:
		return defaultRunsConcurrent
	}
}

func (c *config) warmupAt(conc int) int {
	if c.warmup > 0 {
		return c.warmup
	}
	return max(c.runsAt(conc)/10, 4*conc)
}

// runner does W1 runs, each checked.
type runner interface {
	run(ctx context.Context) error
}

// sample is one measured round of one system.
type sample struct {
	runs      int
	validated int
	wall      time.Duration
	latencies []time.Duration // sorted
	mallocs   uint64
	bytes     uint64
	cpu       time.Duration // user and system CPU time of this process
	// With a model delay: the runs that failed or timed out in the round,
	// in the window or not, and the first one's error.
	failed, timedOut int
	firstErr         string
}

// figures returns the round's figures per validated run: every run,
// unless the round measured a window with a model delay.
func (s sample) figures() Figures {
	if s.validated == 0 {
		return Figures{}
	}
	n := float64(s.validated)
	return Figures{
		PerRunNS:     float64(s.wall.Nanoseconds()) / n,
		RunsPerSec:   n / s.wall.Seconds(),
		P50NS:        float64(percentile(s.latencies, 0.50).Nanoseconds()),
		P99NS:        float64(percentile(s.latencies, 0.99).Nanoseconds()),
		AllocsPerRun: float64(s.mallocs) / n,
		BytesPerRun:  float64(s.bytes) / n,
		CPUPerRunNS:  float64(s.cpu.Nanoseconds()) / n,
	}
}

// percentile returns the nearest-rank percentile p of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// measure does runs runs of r on conc goroutines and times them. It stops
// at the first run that fails.
func measure(ctx context.Context, r runner, runs, conc int) (sample, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lat := make([]time.Duration, runs)
	var next, validated atomic.Int64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for range min(conc, runs) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(runs) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := r.run(ctx); err != nil {
					cancel(fmt.Errorf("run %d: %w", i+1, err))
					return
				}
				lat[i] = time.Since(t0)
				validated.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := processCPU() - cpu0
	runtime.ReadMemStats(&after)
	if err := context.Cause(ctx); err != nil {
		return sample{}, err
	}
	slices.Sort(lat)
	return sample{
		runs: runs, validated: int(validated.Load()), wall: wall, latencies: lat,
		mallocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc, cpu: cpu,
	}, nil
}

// bench measures the floor and Calf on each store at each concurrency
// level and returns the report.
func bench(ctx context.Context, cfg config, stderr io.Writer) (rep *Report, err error) {
	if cfg.rounds <= 0 {
		cfg.rounds = defaultRounds
	}
	if cfg.handler == nil {
		cfg.handler = w1
	}
	if cfg.delay > 0 {
		if cfg.window <= 0 {
			cfg.window = defaultWindow
		}
		if cfg.runTimeout <= 0 {
			cfg.runTimeout = defaultRunTimeout
		}
	}
	if len(cfg.levels) == 0 || len(cfg.stores)+len(cfg.dists) == 0 {
		return nil, fmt.Errorf("%w: no concurrency level or no system to measure", errUsage)
	}
	if len(cfg.dists) > 0 && len(cfg.workers) == 0 {
		return nil, fmt.Errorf("%w: distributed setups but no number of workers", errUsage)
	}
	ms, err := startMock(ctx, cfg.mock, cfg.handler, cfg.delay, stderr)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := ms.close(); err == nil && cerr != nil {
			err = fmt.Errorf("stop the mock: %w", cerr)
		}
	}()
	dir, cleanup, err := sqliteDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()

	top := slices.Max(cfg.levels)
	fl := newFloor(newHTTPClient(top), ms.url)
	systems := []string{systemFloor}
	if cfg.adapter {
		systems = append(systems, systemAdapter)
	}
	for _, s := range cfg.stores {
		systems = append(systems, "calf/"+s)
		if cfg.noLocal {
			systems = append(systems, "calf/"+s+noLocalSuffix)
		}
	}
	if cfg.skeleton {
		for _, s := range cfg.stores {
			systems = append(systems, skeletonPrefix+s)
		}
	}
	for _, d := range cfg.dists {
		for _, n := range cfg.workers {
			systems = append(systems, distSystem(d, n))
		}
	}
	if cfg.workerStderr == nil {
		cfg.workerStderr = stderr
	}
	method := fmt.Sprintf("%s per concurrency level; each round runs every system once, the order rotating "+
		"from round to round (%s); each measurement warms up, then times a fixed number of runs after a GC; "+
		"figures are the median over the rounds, metric by metric; allocations are runtime.MemStats deltas / runs%s",
		plural(cfg.rounds, "round"), rotation(systems, cfg.rounds), allocNote(ms.inproc)) + distNote(cfg.dists)
	if cfg.delay > 0 {
		method = delayNote(cfg, systems) + allocNote(ms.inproc)
	}
	method += tuningNote(cfg)
	rep = &Report{
		Workload:      "W1: agent " + agentName + ", tool " + toolName + ", " + fmt.Sprintf("%q", prompt) + "; 2 model calls and 1 tool call per run",
		Machine:       machine(),
		Mock:          ms.where,
		MockInProcess: ms.inproc,
		Method:        method,
		ModelDelayNS:  float64(cfg.delay.Nanoseconds()),
		WindowNS:      float64(cfg.window.Nanoseconds()),
		RunTimeoutNS:  float64(cfg.runTimeout.Nanoseconds()),
	}
	for _, conc := range cfg.levels {
		lv := Level{Concurrency: conc, RunsPerRound: cfg.runsAt(conc), WarmupRuns: cfg.warmupAt(conc), Rounds: cfg.rounds}
		if cfg.delay > 0 {
			lv.RunsPerRound, lv.WarmupRuns = 0, 0
			lv.ModelDelayNS, lv.WindowNS = float64(cfg.delay.Nanoseconds()), float64(cfg.window.Nanoseconds())
			if cfg.cold {
				lv.RunsPerRound, lv.WindowNS, lv.Cold = conc, 0, true
			}
			lv.IdealRunsPerSec = idealRunsPerSec(conc, cfg.delay)
			lv.IdealLatencyNS = float64(idealLatency(cfg.delay).Nanoseconds())
		}
		samples := make([][]sample, len(systems))
		for r := range cfg.rounds {
			for k := range systems {
				i := (r + k) % len(systems)
				s, err := measureSystem(ctx, systems[i], cfg, conc, top, fl, ms.url, dir)
				if err != nil {
					return nil, fmt.Errorf("%s at concurrency %d, round %d: %w", systems[i], conc, r+1, err)
				}
				samples[i] = append(samples[i], s)
				if cfg.progress != nil {
					f := s.figures()
					if cfg.delay > 0 {
						fmt.Fprintf(cfg.progress, "concurrency %d round %d/%d %-12s %9s runs/s, p50 %s, p99 %s, %d/%d validated, %d failed\n",
							conc, r+1, cfg.rounds, systems[i], fmtRate(f.RunsPerSec), fmtNS(f.P50NS), fmtNS(f.P99NS), s.validated, s.runs, s.failed)
					} else {
						fmt.Fprintf(cfg.progress, "concurrency %d round %d/%d %-12s %10s/run %9.0f runs/s\n",
							conc, r+1, cfg.rounds, systems[i], fmtNS(f.PerRunNS), f.RunsPerSec)
					}
				}
			}
		}
		for i, name := range systems {
			lv.Results = append(lv.Results, result(name, samples[i]))
		}
		if cfg.delay > 0 {
			vsIdeal(&lv)
		} else {
			lv.Comparisons = compare(lv)
		}
		rep.Levels = append(rep.Levels, lv)
	}
	return rep, nil
}

// measureSystem warms up and measures one round of one system. Each round
// of Calf gets a fresh broker and store.
func measureSystem(ctx context.Context, system string, cfg config, conc, top int, fl *floor, base, dir string) (s sample, err error) {
	var r runner = fl
	// Each measurement of a system other than the floor has an HTTP client
	// of its own, so that the goroutines of its connections carry its
	// profile label (they inherit the label of the run that dialled).
	httpClient := newHTTPClient(top)
	defer httpClient.CloseIdleConnections()
	if setup, workers, ok := parseDistSystem(system); ok {
		ds, err := newDistStack(ctx, setup, workers, cfg.svc, base, top, cfg.tuning, cfg.workerStderr)
		if err != nil {
			return sample{}, err
		}
		defer func() {
			if cerr := ds.close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}()
		r = ds
	} else if system == systemAdapter {
		a, err := newAdapterRun(httpClient, base)
		if err != nil {
			return sample{}, err
		}
		r = a
	} else if kind, ok := strings.CutPrefix(system, skeletonPrefix); ok {
		s, err := newSkeletonStack(ctx, kind, dir, httpClient, base)
		if err != nil {
			return sample{}, err
		}
		defer s.close()
		r = s
	} else if system != systemFloor {
		kind, remote := strings.CutSuffix(system[len("calf/"):], noLocalSuffix)
		s, err := newCalfStack(ctx, kind, dir, httpClient, base, cfg.tuning.serveConcurrency, remote)
		if err != nil {
			return sample{}, err
		}
		defer s.close()
		r = s
	}
	// The label tells the systems apart in a CPU profile:
	// go tool pprof -tagfocus system=calf/memory.
	pprof.Do(ctx, pprof.Labels("system", system), func(ctx context.Context) {
		if cfg.delay > 0 && cfg.cold {
			s, err = measureBurst(ctx, r, conc, cfg.runTimeout)
			return
		}
		if cfg.delay > 0 {
			s, err = measureWindow(ctx, r, conc, cfg.window, cfg.runTimeout, idealLatency(cfg.delay))
			return
		}
		if _, err = measure(ctx, r, cfg.warmupAt(conc), conc); err != nil {
			err = fmt.Errorf("warm-up: %w", err)
			return
		}
		s, err = measure(ctx, r, cfg.runsAt(conc), conc)
	})
	return s, err
}

// result summarises the rounds of one system.
func result(system string, rounds []sample) Result {
	res := Result{System: system}
	for _, s := range rounds {
		res.Rounds = append(res.Rounds, s.figures())
		res.Validated += s.validated
		res.Runs += s.runs
		res.Failed += s.failed
		res.TimedOut += s.timedOut
		if res.FirstError == "" {
			res.FirstError = s.firstErr
		}
	}
	med := func(get func(Figures) float64) float64 {
		v := make([]float64, len(res.Rounds))
		for i, f := range res.Rounds {
			v[i] = get(f)
		}
		return median(v)
	}
	res.Figures = Figures{
		PerRunNS:     med(func(f Figures) float64 { return f.PerRunNS }),
		RunsPerSec:   med(func(f Figures) float64 { return f.RunsPerSec }),
		P50NS:        med(func(f Figures) float64 { return f.P50NS }),
		P99NS:        med(func(f Figures) float64 { return f.P99NS }),
		AllocsPerRun: med(func(f Figures) float64 { return f.AllocsPerRun }),
		BytesPerRun:  med(func(f Figures) float64 { return f.BytesPerRun }),
		CPUPerRunNS:  med(func(f Figures) float64 { return f.CPUPerRunNS }),
	}
	return res
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Targets of the framework against the floor.
const (
	targetOverhead        = 0.25 // sequential per-run time at most 25% above the floor's
	targetThroughputRatio = 0.80 // concurrent runs/s at least 80% of the floor's
)

// compare sets each Calf result of lv against the floor's.
func compare(lv Level) []Comparison {
	floor := lv.Results[0].Figures
	var out []Comparison
	for _, r := range lv.Results[1:] {
		c := Comparison{
			System:          r.System,
			Overhead:        r.PerRunNS/floor.PerRunNS - 1,
			ThroughputRatio: r.RunsPerSec / floor.RunsPerSec,
		}
		switch {
		case r.System == systemAdapter || strings.HasPrefix(r.System, skeletonPrefix):
			// Not a target: the share of Calf's figures the adapter takes,
			// and the least the event model and the store take.
		case lv.Concurrency == 1:
			c.Target = fmt.Sprintf("overhead < %.0f%%", targetOverhead*100)
			c.Met = c.Overhead < targetOverhead
		default:
			c.Target = fmt.Sprintf("throughput ratio >= %.0f%%", targetThroughputRatio*100)
			c.Met = c.ThroughputRatio >= targetThroughputRatio
		}
		out = append(out, c)
	}
	return out
}

// rotation describes the order of the systems in the first rounds.
func rotation(systems []string, rounds int) string {
	var s string
	for r := range min(rounds, len(systems)) {
		if r > 0 {
			s += "; "
		}
		for k := range systems {
			if k > 0 {
				s += ", "
			}
			s += systems[(r+k)%len(systems)]
		}
	}
	if rounds > len(systems) {
		s += "; ..."
	}
	return s
}

func allocNote(inproc bool) string {
	if inproc {
		return "; the mock runs in this process, so they include the mock's"
	}
	return "; the mock runs elsewhere, so they count the client side only"
}

func distNote(dists []string) string {
	if len(dists) == 0 {
		return ""
	}
	return "; calf/SETUP/Nw is the agent served by N worker processes of this binary (agent.Serve) on the setup's broker and store, " +
		"each round on a fresh namespace (NATS stream, Kafka cluster, PostgreSQL schema, Redis key prefix), and called from this " +
		"process with agent.Run; the workers' allocations are not counted (for Kafka, the kfake cluster runs in this process and its are)"
}

// tuningNote says which of Calf's defaults the benchmark changed.
func tuningNote(cfg config) string {
	var s string
	if n := cfg.tuning.serveConcurrency; n > 0 {
		s += fmt.Sprintf("; each handler of Calf's agent works on up to %d runs at once (-serve-concurrency)", n)
	}
	if n := cfg.tuning.partitions; len(cfg.dists) > 0 && n > 0 && n != distPartitions {
		s += fmt.Sprintf("; the distributed brokers have %d partitions (-partitions)", n)
	}
	return s
}

// plural returns n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
