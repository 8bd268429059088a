package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// Report is the result of a benchmark, as -json prints it.
type Report struct {
	Workload string  `json:"workload"`
	Machine  Machine `json:"machine"`
	// Mock says where the mock ran.
	Mock string `json:"mock"`
	// MockInProcess reports that the mock's allocations are counted.
	MockInProcess bool `json:"mock_in_process"`
	// Method says how the figures were taken.
	Method string `json:"method"`
	// ModelDelayNS is the mock's latency per chat completion
	// (-model-delay), in nanoseconds; zero without a delay. With a delay,
	// WindowNS is the measured window of each round and RunTimeoutNS the
	// bound on each run.
	ModelDelayNS float64 `json:"model_delay_ns,omitempty"`
	WindowNS     float64 `json:"window_ns,omitempty"`
	RunTimeoutNS float64 `json:"run_timeout_ns,omitempty"`
	Levels       []Level `json:"levels"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
}

func machine() Machine {
	return Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
}

// Level holds the results at one concurrency level.
type Level struct {
	// Concurrency is the number of runs in flight at once.
	Concurrency  int `json:"concurrency"`
	RunsPerRound int `json:"runs_per_round"`
	WarmupRuns   int `json:"warmup_runs"`
	Rounds       int `json:"rounds"`
	// With a model delay: the delay and the window, the ideal throughput
	// (Concurrency / (2 × the delay): W1's two model calls and nothing
	// else) and the ideal latency of a run (2 × the delay). RunsPerRound
	// and WarmupRuns are then zero: each round measures a window.
	ModelDelayNS float64 `json:"model_delay_ns,omitempty"`
	WindowNS     float64 `json:"window_ns,omitempty"`
	// Cold reports a cold-start level (-cold): each round sent
	// Concurrency runs at once to systems just started, and no window
	// (WindowNS is zero).
	Cold            bool    `json:"cold,omitempty"`
	IdealRunsPerSec float64 `json:"ideal_runs_per_sec,omitempty"`
	IdealLatencyNS  float64 `json:"ideal_latency_ns,omitempty"`
	// Results has the floor first, then Calf on each store.
	Results []Result `json:"results"`
	// Comparisons set Calf against the floor and its targets; none with a
	// model delay, where each Result has its Ideal figures instead.
	Comparisons []Comparison `json:"comparisons"`
}

// Figures are the measurements of one round, or their medians.
type Figures struct {
	// PerRunNS is the wall time of the measured runs divided by their
	// number, in nanoseconds.
	PerRunNS   float64 `json:"per_run_ns"`
	RunsPerSec float64 `json:"runs_per_sec"`
	// P50NS and P99NS are percentiles of the runs' latencies.
	P50NS float64 `json:"p50_ns"`
	P99NS float64 `json:"p99_ns"`
	// AllocsPerRun and BytesPerRun are heap allocations divided by runs.
	AllocsPerRun float64 `json:"allocs_per_run"`
	BytesPerRun  float64 `json:"bytes_per_run"`
	// CPUPerRunNS is the CPU time (user and system) this process spent
	// during the measured runs divided by their number, in nanoseconds:
	// the client side only when the mock runs in another process. Unlike
	// the wall time, it hardly moves with the other load of the machine.
	CPUPerRunNS float64 `json:"cpu_per_run_ns"`
}

// Result is one system's figures at one level: the medians over the
// rounds, and each round's.
type Result struct {
	System string `json:"system"`
	Figures
	// Runs counts the measured runs over all rounds; Validated counts
	// those whose output was checked to be W1's answer.
	Runs      int       `json:"runs"`
	Validated int       `json:"validated"`
	Rounds    []Figures `json:"rounds"`
	// With a model delay, Runs counts the runs that ended in the rounds'
	// windows, and the figures are per validated run. Failed counts the
	// runs that failed, TimedOut those of them that timed out, in the
	// windows or not (warm-up, drain); FirstError is the first failure.
	// Without a delay, a failed run fails the benchmark.
	Failed     int    `json:"failed,omitempty"`
	TimedOut   int    `json:"timed_out,omitempty"`
	FirstError string `json:"first_error,omitempty"`
	// Ideal sets the figures against the ideal ones, with a model delay.
	Ideal *VsIdeal `json:"ideal,omitempty"`
}

// VsIdeal sets a result measured with a model delay against the ideal,
// model-bound figures of its level, and against the floor's throughput.
type VsIdeal struct {
	// ThroughputRatio is runs/s over the ideal runs/s.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// FloorThroughputRatio is runs/s over the floor's.
	FloorThroughputRatio float64 `json:"floor_throughput_ratio"`
	// P50Ratio and P99Ratio are the latency percentiles over the ideal
	// latency of a run.
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
}

// Comparison sets one Calf result against the floor's at the same level.
type Comparison struct {
	System string `json:"system"`
	// Overhead is Calf's per-run time over the floor's, minus one.
	Overhead float64 `json:"overhead"`
	// ThroughputRatio is Calf's runs/s over the floor's.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// Target is the target that applies at this level, and Met whether
	// it was reached. The adapter measured alone has no target: Target is
	// empty.
	Target string `json:"target"`
	Met    bool   `json:"met"`
}

// writeJSON prints rep as indented JSON.
func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints rep for people.
func writeTable(w io.Writer, rep *Report) error {
	m := rep.Machine
	fmt.Fprintf(w, "workload: %s\n", rep.Workload)
	fmt.Fprintf(w, "machine:  %s/%s, %d CPUs, GOMAXPROCS %d, %s\n", m.GOOS, m.GOARCH, m.CPUs, m.GOMAXPROCS, m.GoVersion)
	fmt.Fprintf(w, "mock:     %s\n", rep.Mock)
	fmt.Fprintf(w, "method:   %s\n", rep.Method)
	if rep.ModelDelayNS > 0 {
		return writeDelayTable(w, rep)
	}
	for _, lv := range rep.Levels {
		fmt.Fprintf(w, "\nconcurrency %d: %s per round after %s, median of %s\n",
			lv.Concurrency, plural(lv.RunsPerRound, "run"), plural(lv.WarmupRuns, "warm-up run"), plural(lv.Rounds, "round"))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\tper run\truns/s\tp50\tp99\tCPU/run\tallocs/run\tB/run\tvalidated\t")
		for _, r := range lv.Results {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%.0f\t%.0f\t%d/%d\t\n", r.System, fmtNS(r.PerRunNS), r.RunsPerSec,
				fmtNS(r.P50NS), fmtNS(r.P99NS), fmtNS(r.CPUPerRunNS), r.AllocsPerRun, r.BytesPerRun, r.Validated, r.Runs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, c := range lv.Comparisons {
			if c.Target == "" {
				fmt.Fprintf(w, "%s vs floor: overhead %+.1f%%, throughput ratio %.1f%%\n", c.System, c.Overhead*100, c.ThroughputRatio*100)
				continue
			}
			verdict := "met"
			if !c.Met {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, "%s vs floor: overhead %+.1f%%, throughput ratio %.1f%%; target %s: %s\n",
				c.System, c.Overhead*100, c.ThroughputRatio*100, c.Target, verdict)
		}
	}
	return nil
}

// fmtNS formats nanoseconds as a duration with three significant digits.
func fmtNS(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond).String()
	case d >= 10*time.Microsecond:
		return d.Round(100 * time.Nanosecond).String()
	default:
		return d.Round(10 * time.Nanosecond).String()
	}
}
