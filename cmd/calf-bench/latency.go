package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// Defaults of the model-latency mode (-model-delay).
const (
	defaultWindow     = 10 * time.Second
	defaultRunTimeout = 30 * time.Second
)

// errRunsFailed reports, after the report, that runs of a benchmark with a
// model delay failed or timed out; they are counted in the report.
var errRunsFailed = errors.New("calf-bench: runs failed")

// delayed returns h answering each request after d, the model's latency,
// or with ctx's error as soon as ctx ends (the client went away or the
// server is closing).
func delayed(h modeltest.ServerHandler, d time.Duration) modeltest.ServerHandler {
	if d <= 0 {
		return h
	}
	return func(ctx context.Context, req *model.Request) (*model.Response, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return h(ctx, req)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// idealRunsPerSec is the throughput of conc callers whose runs take
// exactly W1's two model calls of delay each, and nothing else.
func idealRunsPerSec(conc int, delay time.Duration) float64 {
	return float64(conc) / (2 * delay).Seconds()
}

// idealLatency is the latency of a run that takes exactly W1's two model
// calls of delay each.
func idealLatency(delay time.Duration) time.Duration { return 2 * delay }

// measureWindow measures r with conc callers for a time window, each
// caller starting a run as soon as its last one ends, each run bounded by
// timeout. The callers start one after the other over ramp (the ideal
// latency of a run), so that their runs end spread over time rather than
// in bursts of conc that a window would cut at random (with a constant
// latency, callers started together stay in step: a 10 s window of 1 s
// runs would count 9 or 10 bursts). The window opens once every caller
// has finished a first run (the warm-up: connections open, every caller
// busy) and lasts window; the runs that end inside it are the round's
// runs: those that succeed (their output checked) give the throughput and
// the latencies. Callers start no run after the window, and the runs still
// going are waited for (the drain), so that the next measurement starts
// on a quiet machine. Runs that fail or time out, in the window or not,
// are counted, not fatal; only the end of ctx stops the measurement with
// an error.
func measureWindow(ctx context.Context, r runner, conc int, window, timeout, ramp time.Duration) (sample, error) {
	var (
		mu               sync.Mutex
		open, closed     bool
		lat              []time.Duration
		runs, validated  int // ended in the window
		failed, timedOut int // anywhere in the round
		firstErr         string
		warm             atomic.Int64
		allWarm          = make(chan struct{})
		stop             = make(chan struct{})
		before, after    runtime.MemStats
		cpu0, cpu1       time.Duration
		start, end       time.Time
		stopOnce         sync.Once
		closeStop        = func() { stopOnce.Do(func() { close(stop) }) }
		callersDone      = make(chan struct{})
		wg               sync.WaitGroup
	)
	record := func(d time.Duration, err error, expired bool) {
		mu.Lock()
		defer mu.Unlock()
		inWindow := open && !closed
		if inWindow {
			runs++
		}
		if err != nil {
			failed++
			if expired {
				timedOut++
			}
			if firstErr == "" {
				firstErr = err.Error()
			}
			return
		}
		if inWindow {
			validated++
			lat = append(lat, d)
		}
	}
	for i := range conc {
		wg.Go(func() {
			if wait := ramp * time.Duration(i) / time.Duration(conc); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-stop:
					t.Stop()
					return
				}
			}
			first := true
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, timeout)
				t0 := time.Now()
				err := r.run(rctx)
				d := time.Since(t0)
				expired := err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded)
				cancel()
				if err != nil && ctx.Err() != nil {
					return // interrupted, not failed
				}
				if expired {
					err = fmt.Errorf("timed out after %s: %w", timeout, err)
				}
				record(d, err, expired)
				if first {
					first = false
					if warm.Add(1) == int64(conc) {
						close(allWarm)
					}
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(callersDone)
	}()
	defer func() {
		closeStop()
		<-callersDone
	}()
	select {
	case <-allWarm:
	case <-ctx.Done():
		return sample{}, context.Cause(ctx)
	}
	runtime.ReadMemStats(&before)
	mu.Lock()
	cpu0, start, open = processCPU(), time.Now(), true
	mu.Unlock()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return sample{}, context.Cause(ctx)
	}
	mu.Lock()
	cpu1, end, closed = processCPU(), time.Now(), true
	mu.Unlock()
	runtime.ReadMemStats(&after)
	closeStop()
	select {
	case <-callersDone:
	case <-ctx.Done():
		return sample{}, context.Cause(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	return sample{
		runs: runs, validated: validated, wall: end.Sub(start), latencies: lat,
		mallocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc, cpu: cpu1 - cpu0,
		failed: failed, timedOut: timedOut, firstErr: firstErr,
	}, nil
}

// measureBurst sends conc runs at once to r, a system that has just
// started, and measures each until it ends: the cold start a fresh worker
// sees. The wall time is from the first run sent to the last one ended.
func measureBurst(ctx context.Context, r runner, conc int, timeout time.Duration) (sample, error) {
	var (
		mu       sync.Mutex
		s        sample
		wg       sync.WaitGroup
		before   runtime.MemStats
		after    runtime.MemStats
		startAll = make(chan struct{})
	)
	for range conc {
		wg.Go(func() {
			<-startAll
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			t0 := time.Now()
			err := r.run(rctx)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			s.runs++
			if err != nil {
				s.failed++
				if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
					s.timedOut++
					err = fmt.Errorf("timed out after %s: %w", timeout, err)
				}
				if s.firstErr == "" {
					s.firstErr = err.Error()
				}
				return
			}
			s.validated++
			s.latencies = append(s.latencies, d)
		})
	}
	runtime.ReadMemStats(&before)
	cpu0, start := processCPU(), time.Now()
	close(startAll)
	wg.Wait()
	s.wall, s.cpu = time.Since(start), processCPU()-cpu0
	runtime.ReadMemStats(&after)
	s.mallocs, s.bytes = after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	if err := ctx.Err(); err != nil {
		return sample{}, context.Cause(ctx)
	}
	slices.Sort(s.latencies)
	return s, nil
}

// delayNote says how a benchmark with a model delay measures.
func delayNote(cfg config, systems []string) string {
	if cfg.cold {
		return fmt.Sprintf("cold starts (-cold): the mock answers each chat completion after %s (-model-delay), so a run's ideal, "+
			"model-bound latency is %s; %s per concurrency level, the order of the systems rotating from round to round (%s); "+
			"each round starts each system afresh (a fresh broker, store and, with -dist, fresh worker processes that have just "+
			"said they serve) and at once sends as many runs as the concurrency level, each bounded by %s, with no warm-up; "+
			"latencies are those of the runs that succeeded (output checked), runs/s is they / the time from the first sent to the last "+
			"ended; figures are the median over the rounds, metric by metric%s",
			cfg.delay, idealLatency(cfg.delay), plural(cfg.rounds, "round"), rotation(systems, cfg.rounds), cfg.runTimeout, distNote(cfg.dists))
	}
	return fmt.Sprintf("the mock answers each chat completion after %s (-model-delay), so a run's ideal, model-bound latency is %s "+
		"and c concurrent callers ideally do c / %s runs/s; %s per concurrency level; each round runs every system once, the order "+
		"rotating from round to round (%s); in each measurement, every caller starts a run as soon as its last one ends, each run "+
		"bounded by %s; once every caller has finished a first run, a %s window opens, and the runs that end in it are measured: "+
		"runs/s is those that succeeded (output checked) / the window, latencies are theirs; the runs still going when it closes "+
		"are waited for; a run that fails or times out, in the window or not, is counted as failed; figures are the median over "+
		"the rounds, metric by metric; CPU and allocations are those of this process during the window / the runs that succeeded in it%s",
		cfg.delay, idealLatency(cfg.delay), idealLatency(cfg.delay), plural(cfg.rounds, "round"), rotation(systems, cfg.rounds),
		cfg.runTimeout, cfg.window, distNote(cfg.dists))
}

// writeDelayTable prints the levels of a benchmark with a model delay.
func writeDelayTable(w io.Writer, rep *Report) error {
	for _, lv := range rep.Levels {
		how := fmt.Sprintf("%s window per round after a warm-up run per caller", fmtNS(lv.WindowNS))
		if lv.Cold {
			how = fmt.Sprintf("%d runs sent at once to systems just started (cold), per round", lv.Concurrency)
		}
		fmt.Fprintf(w, "\nconcurrency %d: model delay %s, %s, median of %s; "+
			"ideal: %s runs/s, %s per run\n",
			lv.Concurrency, fmtNS(lv.ModelDelayNS), how, plural(lv.Rounds, "round"),
			fmtRate(lv.IdealRunsPerSec), fmtNS(lv.IdealLatencyNS))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\truns/s\tideal runs/s\truns/s / ideal\truns/s / floor's\tp50\tp99\tideal latency\tp99 / ideal\tCPU/run\tvalidated\tfailed\ttimed out\t")
		for _, r := range lv.Results {
			var ratio, vsFloor, p99Ratio float64
			if r.Ideal != nil {
				ratio, vsFloor, p99Ratio = r.Ideal.ThroughputRatio, r.Ideal.FloorThroughputRatio, r.Ideal.P99Ratio
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%.1f%%\t%s\t%s\t%s\t%.2f×\t%s\t%d/%d\t%d\t%d\t\n", r.System,
				fmtRate(r.RunsPerSec), fmtRate(lv.IdealRunsPerSec), ratio*100, vsFloor*100,
				fmtNS(r.P50NS), fmtNS(r.P99NS), fmtNS(lv.IdealLatencyNS), p99Ratio,
				fmtNS(r.CPUPerRunNS), r.Validated, r.Runs, r.Failed, r.TimedOut)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range lv.Results {
			if r.FirstError != "" {
				fmt.Fprintf(w, "%s: %s failed; the first: %s\n", r.System, plural(r.Failed, "run"), r.FirstError)
			}
		}
	}
	return nil
}

// fmtRate formats runs per second: one decimal under 100.
func fmtRate(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// vsIdeal sets each result of lv, a level measured with a model delay,
// against the ideal figures and the floor's throughput.
func vsIdeal(lv *Level) {
	floor := lv.Results[0].RunsPerSec
	for i := range lv.Results {
		r := &lv.Results[i]
		v := &VsIdeal{}
		if lv.IdealRunsPerSec > 0 {
			v.ThroughputRatio = r.RunsPerSec / lv.IdealRunsPerSec
		}
		if floor > 0 {
			v.FloorThroughputRatio = r.RunsPerSec / floor
		}
		if lv.IdealLatencyNS > 0 {
			v.P50Ratio = r.P50NS / lv.IdealLatencyNS
			v.P99Ratio = r.P99NS / lv.IdealLatencyNS
		}
		r.Ideal = v
	}
}

// failures counts the failed runs of a report.
func failures(rep *Report) (failed int, systems []string) {
	for _, lv := range rep.Levels {
		for _, r := range lv.Results {
			if r.Failed > 0 {
				failed += r.Failed
				systems = append(systems, fmt.Sprintf("%s at %d", r.System, lv.Concurrency))
			}
		}
	}
	return failed, systems
}
