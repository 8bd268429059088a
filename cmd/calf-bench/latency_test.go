package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// testDelay is the model delay of the tests: small, so that they are
// fast, and large enough that a run's latency is mostly the mock's.
const testDelay = 20 * time.Millisecond

// delayShape is what a report with a model delay must hold, whatever the
// timings.
type delayShape struct {
	Concurrency     int
	IdealRunsPerSec float64
	IdealLatency    time.Duration
	Systems         []string
	Failed          []int
}

func delayShapeOf(rep *Report) []delayShape {
	var out []delayShape
	for _, lv := range rep.Levels {
		s := delayShape{Concurrency: lv.Concurrency, IdealRunsPerSec: lv.IdealRunsPerSec, IdealLatency: time.Duration(lv.IdealLatencyNS)}
		for _, r := range lv.Results {
			s.Systems = append(s.Systems, r.System)
			s.Failed = append(s.Failed, r.Failed)
		}
		out = append(out, s)
	}
	return out
}

// checkDelayFigures reports figures of a report with a model delay that
// cannot come from a measurement, and latencies under the mock's delay.
func checkDelayFigures(t *testing.T, rep *Report, delay time.Duration) {
	t.Helper()
	if time.Duration(rep.ModelDelayNS) != delay {
		t.Errorf("report model delay %v, want %v", time.Duration(rep.ModelDelayNS), delay)
	}
	for _, lv := range rep.Levels {
		if len(lv.Comparisons) != 0 {
			t.Errorf("concurrency %d: comparisons with the floor's targets %+v, want none with a model delay", lv.Concurrency, lv.Comparisons)
		}
		for _, r := range lv.Results {
			if r.Runs == 0 || r.Validated != r.Runs {
				t.Errorf("concurrency %d, %s: %d/%d runs validated, want all of at least one", lv.Concurrency, r.System, r.Validated, r.Runs)
			}
			if len(r.Rounds) != lv.Rounds {
				t.Errorf("concurrency %d, %s: %d rounds, want %d", lv.Concurrency, r.System, len(r.Rounds), lv.Rounds)
			}
			// Every run makes two calls the mock answers after the
			// delay: none can be faster than the ideal.
			if r.P50NS < lv.IdealLatencyNS || r.P99NS < r.P50NS {
				t.Errorf("concurrency %d, %s: p50 %v, p99 %v; want at least the ideal %v, in order", lv.Concurrency, r.System,
					time.Duration(r.P50NS), time.Duration(r.P99NS), time.Duration(lv.IdealLatencyNS))
			}
			if r.RunsPerSec <= 0 {
				t.Errorf("concurrency %d, %s: %v runs/s", lv.Concurrency, r.System, r.RunsPerSec)
			}
			if r.Ideal == nil {
				t.Errorf("concurrency %d, %s: no figures against the ideal", lv.Concurrency, r.System)
				continue
			}
			want := VsIdeal{
				ThroughputRatio:      r.RunsPerSec / lv.IdealRunsPerSec,
				FloorThroughputRatio: r.RunsPerSec / lv.Results[0].RunsPerSec,
				P50Ratio:             r.P50NS / lv.IdealLatencyNS,
				P99Ratio:             r.P99NS / lv.IdealLatencyNS,
			}
			if diff := cmp.Diff(want, *r.Ideal); diff != "" {
				t.Errorf("concurrency %d, %s: against the ideal (-want +got):\n%s", lv.Concurrency, r.System, diff)
			}
		}
	}
}

// TestBenchModelDelay measures the floor and Calf on both in-process
// stores with a model delay: the ideal figures come from the flags, the
// latencies include the mock's delay, and every run in the window is
// validated.
func TestBenchModelDelay(t *testing.T) {
	rep, err := bench(t.Context(), config{
		levels: []int{1, 4}, stores: []string{storeMemory, storeSQLite}, mock: mockInproc, rounds: 2,
		delay: testDelay, window: 300 * time.Millisecond, runTimeout: 10 * time.Second,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	systems := []string{systemFloor, "calf/memory", "calf/sqlite"}
	want := []delayShape{
		{Concurrency: 1, IdealRunsPerSec: 25, IdealLatency: 40 * time.Millisecond, Systems: systems, Failed: []int{0, 0, 0}},
		{Concurrency: 4, IdealRunsPerSec: 100, IdealLatency: 40 * time.Millisecond, Systems: systems, Failed: []int{0, 0, 0}},
	}
	if diff := cmp.Diff(want, delayShapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	checkDelayFigures(t, rep, testDelay)
	if !strings.Contains(rep.Method, "after 20ms") || !strings.Contains(rep.Method, "300ms window") {
		t.Errorf("the method does not give the delay and the window: %s", rep.Method)
	}
}

// TestBenchModelDelayMockProcess: the mock process started by the
// benchmark delays its answers too.
func TestBenchModelDelayMockProcess(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	rep, err := bench(t.Context(), config{
		levels: []int{2}, stores: []string{storeMemory}, mock: mockProcess, rounds: 1,
		delay: testDelay, window: 200 * time.Millisecond, runTimeout: 10 * time.Second,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []delayShape{{Concurrency: 2, IdealRunsPerSec: 50, IdealLatency: 40 * time.Millisecond,
		Systems: []string{systemFloor, "calf/memory"}, Failed: []int{0, 0}}}
	if diff := cmp.Diff(want, delayShapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	checkDelayFigures(t, rep, testDelay)
}

// TestModelDelayCountsFailures: with a model delay, runs that fail or
// time out are counted and reported, not fatal, in every system.
func TestModelDelayCountsFailures(t *testing.T) {
	tests := []struct {
		name     string
		handler  modeltest.ServerHandler
		timedOut bool
	}{
		{"server error", func(context.Context, *model.Request) (*model.Response, error) {
			return nil, &model.StatusError{StatusCode: 500, Message: "overloaded"}
		}, false},
		{"wrong answer", func(ctx context.Context, req *model.Request) (*model.Response, error) {
			if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
				return modeltest.Text("The sum is 6"), nil
			}
			return w1(ctx, req)
		}, false},
		{"no answer", func(ctx context.Context, _ *model.Request) (*model.Response, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := bench(t.Context(), config{
				levels: []int{2}, stores: []string{storeMemory}, mock: mockInproc, rounds: 1, handler: tt.handler,
				delay: testDelay, window: 200 * time.Millisecond, runTimeout: 300 * time.Millisecond,
			}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Levels[0].Results {
				if r.Validated != 0 || r.Failed == 0 || r.FirstError == "" {
					t.Errorf("%s: %d validated, %d failed (%q); want none validated, failures counted", r.System, r.Validated, r.Failed, r.FirstError)
				}
				if tt.timedOut != (r.TimedOut > 0) || r.TimedOut > r.Failed {
					t.Errorf("%s: %d of %d failed runs timed out, want timeouts %v", r.System, r.TimedOut, r.Failed, tt.timedOut)
				}
				if r.RunsPerSec != 0 || r.Ideal == nil || r.Ideal.ThroughputRatio != 0 || math.IsNaN(r.Ideal.FloorThroughputRatio) {
					t.Errorf("%s: %v runs/s, against the ideal %+v; want zeros", r.System, r.RunsPerSec, r.Ideal)
				}
			}
			if n, _ := failures(rep); n == 0 {
				t.Error("failures(report) = 0")
			}
			if err := writeJSON(io.Discard, rep); err != nil {
				t.Errorf("the report does not encode: %v", err)
			}
		})
	}
}

// TestRunModelDelay runs the command with a model delay: the table has
// the columns and the ideal figures of the flags, and the JSON report the
// same; a mock that fails every call makes the command fail after
// printing the failures.
func TestRunModelDelay(t *testing.T) {
	args := []string{"-mock", mockInproc, "-rounds", "1", "-model-delay", "20ms", "-concurrency", "2,5", "-duration", "200ms", "-store", "memory,sqlite"}
	var stdout bytes.Buffer
	if err := run(t.Context(), args, strings.NewReader(""), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	table := stdout.String()
	for _, want := range []string{
		"concurrency 2: model delay 20ms, 200ms window", "ideal: 50.0 runs/s, 40ms per run",
		"concurrency 5: model delay 20ms", "ideal: 125 runs/s, 40ms per run",
		"runs/s  ideal runs/s  runs/s / ideal  runs/s / floor's  p50  p99  ideal latency  p99 / ideal  CPU/run  validated  failed  timed out",
		"floor", "calf/memory", "calf/sqlite",
	} {
		if !strings.Contains(strings.Join(strings.Fields(table), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "overhead") || strings.Contains(table, "target") {
		t.Errorf("the table sets the figures against the zero-delay targets:\n%s", table)
	}
	// Each row ends with its counts: validated n/n, 0 failed, 0 timed out.
	rows := 0
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) == 13 && (f[0] == systemFloor || strings.HasPrefix(f[0], "calf/")) {
			rows++
			if n, all, _ := strings.Cut(f[10], "/"); n != all || n == "0" || f[11] != "0" || f[12] != "0" {
				t.Errorf("row %q: want every run validated, none failed", line)
			}
		}
	}
	if rows != 6 {
		t.Errorf("%d rows of figures, want 6:\n%s", rows, table)
	}

	stdout.Reset()
	if err := run(t.Context(), append(args, "-json"), strings.NewReader(""), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the output is not a report: %v\n%s", err, stdout.String())
	}
	systems := []string{systemFloor, "calf/memory", "calf/sqlite"}
	want := []delayShape{
		{Concurrency: 2, IdealRunsPerSec: 50, IdealLatency: 40 * time.Millisecond, Systems: systems, Failed: []int{0, 0, 0}},
		{Concurrency: 5, IdealRunsPerSec: 125, IdealLatency: 40 * time.Millisecond, Systems: systems, Failed: []int{0, 0, 0}},
	}
	if diff := cmp.Diff(want, delayShapeOf(&rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	checkDelayFigures(t, &rep, testDelay)

	// A mock that fails every call, started apart and given by URL.
	srv := modeltest.NewServer(delayed(func(context.Context, *model.Request) (*model.Response, error) {
		return nil, &model.StatusError{StatusCode: 503, Message: "overloaded"}
	}, testDelay))
	defer srv.Close()
	stdout.Reset()
	err := run(t.Context(), []string{"-mock", srv.URL(), "-rounds", "1", "-model-delay", "20ms", "-concurrency", "2", "-duration", "200ms"},
		strings.NewReader(""), &stdout, io.Discard)
	if !errors.Is(err, errRunsFailed) {
		t.Errorf("run with a failing mock: err = %v, want %v", err, errRunsFailed)
	}
	if !strings.Contains(stdout.String(), "calf/memory: ") || !strings.Contains(stdout.String(), "overloaded") {
		t.Errorf("the table does not report the failures:\n%s", stdout.String())
	}
}

// TestServeMockDelay: -serve-mock -model-delay answers each call after
// the delay, so that the floor's run takes at least two of them.
func TestServeMockDelay(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"-serve-mock", "-stdin-lifeline", "-model-delay", "50ms"}, stdinR, stdoutW, io.Discard)
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(line)
	start := time.Now()
	if err := newFloor(newHTTPClient(1), base).run(t.Context()); err != nil {
		t.Fatalf("a run against the served mock: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("a run took %v, want at least two delays of 50ms", d)
	}
	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mock did not stop when its standard input closed")
	}
}

// TestDelayedRespectsContext: the delayed mock gives up as soon as the
// request's context ends (a delay of an hour would time the test out).
func TestDelayedRespectsContext(t *testing.T) {
	h := delayed(w1, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := h(ctx, &model.Request{Messages: []model.Message{model.UserMessage(prompt)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want %v", err, context.Canceled)
	}
	if got := delayed(w1, 0); got == nil {
		t.Error("delayed(h, 0) = nil")
	}
}

// TestMockTakesManyConcurrentCalls: 1,000 callers of the floor's HTTP
// client have their first calls in the delayed mock at once; neither the
// client's transport nor the mock caps them. The mock holds every first
// call until all of them are in, so a cap would hang the test, not slow it.
func TestMockTakesManyConcurrentCalls(t *testing.T) {
	const callers = 1000
	var (
		mu    sync.Mutex
		in    int
		full  = make(chan struct{})
		calls int
	)
	h := delayed(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		if req.Messages[len(req.Messages)-1].Role != model.RoleTool {
			mu.Lock()
			calls++
			if in++; in == callers {
				close(full)
			}
			mu.Unlock()
			select {
			case <-full:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return w1(ctx, req)
	}, time.Millisecond)
	srv := modeltest.NewServer(h)
	defer srv.Close()
	client := newHTTPClient(callers)
	defer client.CloseIdleConnections()
	fl := newFloor(client, srv.URL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { errs <- fl.run(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a run failed (did the transport or the mock cap concurrency?): %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != callers {
		t.Errorf("the mock saw %d first calls, want %d", calls, callers)
	}
}

func TestIdealFigures(t *testing.T) {
	for _, tc := range []struct {
		conc  int
		delay time.Duration
		want  float64
	}{
		{64, 500 * time.Millisecond, 64},
		{1000, 500 * time.Millisecond, 1000},
		{1, 20 * time.Millisecond, 25},
		{4, 20 * time.Millisecond, 100},
	} {
		if got := idealRunsPerSec(tc.conc, tc.delay); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("idealRunsPerSec(%d, %v) = %v, want %v", tc.conc, tc.delay, got, tc.want)
		}
		if got := idealLatency(tc.delay); got != 2*tc.delay {
			t.Errorf("idealLatency(%v) = %v", tc.delay, got)
		}
	}
}

// TestServeConcurrency: -serve-concurrency bounds the runs each handler
// of the agent works on at once, so with 1 the model never has two calls
// in flight, whatever the callers.
func TestServeConcurrency(t *testing.T) {
	var (
		mu            sync.Mutex
		inFlight, top int
	)
	srv := modeltest.NewServer(delayed(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		inFlight++
		top = max(top, inFlight)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		time.Sleep(2 * time.Millisecond) // a window for a second call to overlap
		return w1(ctx, req)
	}, time.Millisecond))
	defer srv.Close()
	stack, err := newCalfStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(4), srv.URL(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.close()
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for range 4 {
		wg.Go(func() {
			for range 3 {
				errs <- stack.run(t.Context())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if top != 1 {
		t.Errorf("%d model calls in flight at once, want 1", top)
	}
	if serveOptions(0) != nil || serveOptions(3).Concurrency != 3 {
		t.Errorf("serveOptions(0) = %v, serveOptions(3) = %v", serveOptions(0), serveOptions(3))
	}
}

func TestTuningNote(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{}, ""},
		{config{tuning: tuning{partitions: distPartitions}, dists: []string{setupNATSPostgres}}, ""},
		{config{tuning: tuning{serveConcurrency: 1024}}, "; each handler of Calf's agent works on up to 1024 runs at once (-serve-concurrency)"},
		{config{tuning: tuning{partitions: 64}}, ""},
		{config{tuning: tuning{partitions: 64}, dists: []string{setupKafkaRedis}}, "; the distributed brokers have 64 partitions (-partitions)"},
	} {
		if got := tuningNote(tc.cfg); got != tc.want {
			t.Errorf("tuningNote(%+v) = %q, want %q", tc.cfg.tuning, got, tc.want)
		}
	}
}
