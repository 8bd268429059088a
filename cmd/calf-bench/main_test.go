package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// asMainEnv makes the test binary behave as the command, so that the
// benchmark can start it as its mock process.
const asMainEnv = "CALF_BENCH_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shape is what a report must hold, whatever the timings.
type shape struct {
	Concurrency int
	Systems     []string
	Runs        []int
	Validated   []int
	Targets     []string
}

func shapeOf(rep *Report) []shape {
	var out []shape
	for _, lv := range rep.Levels {
		s := shape{Concurrency: lv.Concurrency}
		for _, r := range lv.Results {
			s.Systems = append(s.Systems, r.System)
			s.Runs = append(s.Runs, r.Runs)
			s.Validated = append(s.Validated, r.Validated)
		}
		for _, c := range lv.Comparisons {
			s.Targets = append(s.Targets, c.System+": "+c.Target)
		}
		out = append(out, s)
	}
	return out
}

// checkFigures reports figures that cannot come from a measurement.
func checkFigures(t *testing.T, rep *Report) {
	t.Helper()
	for _, lv := range rep.Levels {
		for _, r := range lv.Results {
			if len(r.Rounds) != lv.Rounds {
				t.Errorf("concurrency %d, %s: %d rounds, want %d", lv.Concurrency, r.System, len(r.Rounds), lv.Rounds)
			}
			for _, f := range append([]Figures{r.Figures}, r.Rounds...) {
				if f.PerRunNS <= 0 || f.RunsPerSec <= 0 || f.P50NS <= 0 || f.P50NS > f.P99NS || f.AllocsPerRun <= 0 || f.BytesPerRun <= 0 || f.CPUPerRunNS < 0 {
					t.Errorf("concurrency %d, %s: implausible figures %+v", lv.Concurrency, r.System, f)
				}
			}
		}
		for _, c := range lv.Comparisons {
			if c.ThroughputRatio <= 0 || c.Overhead <= -1 {
				t.Errorf("concurrency %d, %s: implausible comparison %+v", lv.Concurrency, c.System, c)
			}
		}
	}
}

func TestBench(t *testing.T) {
	const runs, rounds = 20, 3
	rep, err := bench(t.Context(), config{
		runs: runs, warmup: 4, levels: []int{1, 4}, stores: []string{storeMemory, storeSQLite},
		mock: mockInproc, rounds: rounds,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	all := []int{runs * rounds, runs * rounds, runs * rounds}
	systems := []string{systemFloor, "calf/memory", "calf/sqlite"}
	want := []shape{
		{Concurrency: 1, Systems: systems, Runs: all, Validated: all,
			Targets: []string{"calf/memory: overhead < 25%", "calf/sqlite: overhead < 25%"}},
		{Concurrency: 4, Systems: systems, Runs: all, Validated: all,
			Targets: []string{"calf/memory: throughput ratio >= 80%", "calf/sqlite: throughput ratio >= 80%"}},
	}
	if diff := cmp.Diff(want, shapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	if !rep.MockInProcess {
		t.Error("the report does not say that the in-process mock's allocations are counted")
	}
	checkFigures(t, rep)
}

// TestBenchMockProcess runs the mock as a child process, as the command
// does by default: the test binary stands in for the command.
func TestBenchMockProcess(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	rep, err := bench(t.Context(), config{runs: 10, warmup: 2, levels: []int{2}, stores: []string{storeMemory}, adapter: true, mock: mockProcess, rounds: 1}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := []shape{{Concurrency: 2, Systems: []string{systemFloor, systemAdapter, "calf/memory"}, Runs: []int{10, 10, 10}, Validated: []int{10, 10, 10},
		Targets: []string{"adapter: ", "calf/memory: throughput ratio >= 80%"}}}
	if diff := cmp.Diff(want, shapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	if rep.MockInProcess || !strings.HasPrefix(rep.Mock, "separate process") {
		t.Errorf("mock = %q (in process %v), want a separate process", rep.Mock, rep.MockInProcess)
	}
	checkFigures(t, rep)
}

// TestRunsCheckTheirOutput: a run whose model does not do W1 fails, in
// every system, and so does the benchmark.
func TestRunsCheckTheirOutput(t *testing.T) {
	answer := func(text string) modeltest.ServerHandler {
		return func(ctx context.Context, req *model.Request) (*model.Response, error) {
			if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
				return modeltest.Text(text), nil
			}
			return w1(ctx, req)
		}
	}
	tests := []struct {
		name    string
		handler modeltest.ServerHandler
	}{
		{"wrong answer", answer("The sum is 6")},
		{"answer with extra text", answer(wantOutput + ".")},
		{"no tool call", func(context.Context, *model.Request) (*model.Response, error) {
			return modeltest.Text(wantOutput), nil
		}},
		{"another tool", func(ctx context.Context, req *model.Request) (*model.Response, error) {
			if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
				return w1(ctx, req)
			}
			return modeltest.ToolCalls(modeltest.Call(toolCallID, "multiply", toolArgs)), nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(tt.handler)
			defer srv.Close()
			fl := newFloor(newHTTPClient(1), srv.URL())
			if err := fl.run(t.Context()); !errors.Is(err, errWrongOutput) {
				t.Errorf("floor: err = %v, want %v", err, errWrongOutput)
			}
			ad, err := newAdapterRun(newHTTPClient(1), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			if err := ad.run(t.Context()); !errors.Is(err, errWrongOutput) {
				t.Errorf("adapter: err = %v, want %v", err, errWrongOutput)
			}
			stack, err := newCalfStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(1), srv.URL(), 0, false)
			if err != nil {
				t.Fatal(err)
			}
			defer stack.close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := stack.run(ctx); !errors.Is(err, errWrongOutput) {
				t.Errorf("calf: err = %v, want %v", err, errWrongOutput)
			}
			skel, err := newSkeletonStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(1), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer skel.close()
			if err := skel.run(ctx); !errors.Is(err, errWrongOutput) {
				t.Errorf("skeleton: err = %v, want %v", err, errWrongOutput)
			}
			_, err = bench(t.Context(), config{runs: 2, warmup: 1, levels: []int{1}, stores: []string{storeMemory}, mock: mockInproc, handler: tt.handler}, io.Discard)
			if !errors.Is(err, errWrongOutput) {
				t.Errorf("bench: err = %v, want %v", err, errWrongOutput)
			}
		})
	}
}

// TestFloorSendsWhatTheAdapterSends compares the requests of a floor run
// with those of a Calf run, as the mock decodes them.
func TestFloorSendsWhatTheAdapterSends(t *testing.T) {
	var mu sync.Mutex
	var got []*model.Request
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		return w1(ctx, req)
	})
	defer srv.Close()
	take := func() []*model.Request {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	if err := newFloor(newHTTPClient(1), srv.URL()).run(t.Context()); err != nil {
		t.Fatal(err)
	}
	floorReqs := take()
	stack, err := newCalfStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(1), srv.URL(), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.close()
	if err := stack.run(t.Context()); err != nil {
		t.Fatal(err)
	}
	calfReqs := take()
	ad, err := newAdapterRun(newHTTPClient(1), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.run(t.Context()); err != nil {
		t.Fatal(err)
	}
	adapterReqs := take()
	skel, err := newSkeletonStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(1), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer skel.close()
	if err := skel.run(t.Context()); err != nil {
		t.Fatal(err)
	}
	skeletonReqs := take()
	if len(floorReqs) != 2 {
		t.Fatalf("the floor made %d model calls, want 2", len(floorReqs))
	}
	if diff := cmp.Diff(calfReqs, floorReqs); diff != "" {
		t.Errorf("requests (-calf +floor):\n%s", diff)
	}
	if diff := cmp.Diff(adapterReqs, floorReqs); diff != "" {
		t.Errorf("requests (-adapter +floor):\n%s", diff)
	}
	if diff := cmp.Diff(skeletonReqs, floorReqs); diff != "" {
		t.Errorf("requests (-skeleton +floor):\n%s", diff)
	}
}

// TestSkeleton checks that the skeleton of a Calf run is measured beside
// Calf on each store, and that a run of it writes what a W1 run of Calf
// writes: the run's record four times, ending with the complete run's
// state, and the tool's result.
func TestSkeleton(t *testing.T) {
	const runs = 10
	rep, err := bench(t.Context(), config{
		runs: runs, warmup: 2, levels: []int{4}, stores: []string{storeMemory, storeSQLite}, skeleton: true, mock: mockInproc, rounds: 1,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	all := []int{runs, runs, runs, runs, runs}
	want := []shape{{Concurrency: 4, Systems: []string{systemFloor, "calf/memory", "calf/sqlite", "skeleton/memory", "skeleton/sqlite"}, Runs: all, Validated: all,
		Targets: []string{"calf/memory: throughput ratio >= 80%", "calf/sqlite: throughput ratio >= 80%", "skeleton/memory: ", "skeleton/sqlite: "}}}
	if diff := cmp.Diff(want, shapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}

	srv := modeltest.NewServer(w1)
	defer srv.Close()
	for _, kind := range []string{storeMemory, storeSQLite} {
		s, err := newSkeletonStack(t.Context(), kind, t.TempDir(), newHTTPClient(1), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		if err := s.run(t.Context()); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		recs, err := s.store.List(t.Context(), store.KindRun, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Version != 4 || !bytes.Equal(recs[0].Data, s.states[3]) {
			t.Errorf("%s: run records %+v, want one at version 4 holding the complete run", kind, recs)
		}
		st, err := agent.DecodeRunInfo(s.states[3])
		if err != nil || st.Status != agent.RunComplete || len(st.Messages) != 4 {
			t.Errorf("%s: the last state written is %s (%v), want a complete run of four messages", kind, s.states[3], err)
		}
		if len(st.ToolCalls) != 1 || st.ToolCalls[0].Result.Text() != "5" {
			t.Errorf("%s: the run's tool calls %+v, want one whose result is 5", kind, st.ToolCalls)
		}
		// As Calf on the in-process broker, the tool's result goes into
		// the run's record.
		results, err := s.store.List(t.Context(), store.KindToolResult, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 0 {
			t.Errorf("%s: tool result records %+v, want none", kind, results)
		}
	}
}

func TestServeMock(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveMock(context.Background(), stdinR, true, stdoutW, w1) }()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(line)
	if err := checkLoopback(base); err != nil {
		t.Fatal(err)
	}
	if err := newFloor(newHTTPClient(1), base).run(t.Context()); err != nil {
		t.Fatalf("a run against the served mock: %v", err)
	}
	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveMock did not stop when its standard input closed")
	}
}

func TestRunJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-json", "-mock", mockInproc, "-runs", "5", "-warmup", "2", "-rounds", "1", "-concurrency", "1, 3"}
	if err := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the output is not a report: %v\n%s", err, stdout.String())
	}
	systems := []string{systemFloor, "calf/memory"}
	want := []shape{
		{Concurrency: 1, Systems: systems, Runs: []int{5, 5}, Validated: []int{5, 5}, Targets: []string{"calf/memory: overhead < 25%"}},
		{Concurrency: 3, Systems: systems, Runs: []int{5, 5}, Validated: []int{5, 5}, Targets: []string{"calf/memory: throughput ratio >= 80%"}},
	}
	if diff := cmp.Diff(want, shapeOf(&rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
}

func TestRunTable(t *testing.T) {
	var stdout bytes.Buffer
	args := []string{"-mock", mockInproc, "-runs", "3", "-warmup", "1", "-rounds", "1", "-concurrency", "1"}
	if err := run(t.Context(), args, strings.NewReader(""), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"concurrency 1:", "floor", "calf/memory", "3/3", "calf/memory vs floor: overhead"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		args []string
		want error
	}{
		{[]string{"-concurrency", "0"}, errUsage},
		{[]string{"-concurrency", "1,x"}, errUsage},
		{[]string{"-store", "postgres"}, errUsage},
		{[]string{"-rounds", "0"}, errUsage},
		{[]string{"-runs", "-1"}, errUsage},
		{[]string{"-mock", "ftp://example"}, errUsage},
		{[]string{"-dist", "kafka+sqlite"}, errUsage},
		{[]string{"-dist", setupNATSPostgres, "-workers", "0"}, errUsage},
		{[]string{"-worker", "{not json"}, errUsage},
		{[]string{"-duration", "1s"}, errUsage},
		{[]string{"-run-timeout", "1s"}, errUsage},
		{[]string{"-model-delay", "-1s"}, errUsage},
		{[]string{"-model-delay", "1ms", "-runs", "5"}, errUsage},
		{[]string{"-model-delay", "1ms", "-warmup", "5"}, errUsage},
		{[]string{"-model-delay", "1ms", "-duration", "0s"}, errUsage},
		{[]string{"-model-delay", "1ms", "-run-timeout", "-1s"}, errUsage},
		{[]string{"-serve-concurrency", "-1"}, errUsage},
		{[]string{"-partitions", "0"}, errUsage},
		{[]string{"extra"}, errUsage},
		{[]string{"-no-such-flag"}, nil},
		{[]string{"-h"}, flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := run(t.Context(), tt.args, strings.NewReader(""), io.Discard, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPercentileAndMedian(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		sorted   []time.Duration
		p        float64
		want     time.Duration
		median   []float64
		wantMean float64
	}{
		{ms(1, 2, 3, 4), 0.50, 2 * time.Millisecond, []float64{3, 1, 2}, 2},
		{ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond, []float64{4, 1, 2, 3}, 2.5},
		{ms(5), 0.99, 5 * time.Millisecond, []float64{7}, 7},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond, nil, 0},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
		}
		if got := median(tt.median); got != tt.wantMean {
			t.Errorf("median(%v) = %v, want %v", tt.median, got, tt.wantMean)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "add 2 and 3", `quote " and \ backslash`, "tab\tnewline\n\x01", "héllo ☃", "bad \xff utf-8"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q encodes as %s, which is not JSON: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q round-trips as %q, want %q", s, back, wantBack)
		}
	}
}

// TestBenchNoLocal checks -no-local: each store is measured a second time
// with the broker hidden from the runtime as a shared one, and those runs
// complete and check their output like the others.
func TestBenchNoLocal(t *testing.T) {
	rep, err := bench(t.Context(), config{runs: 10, warmup: 2, levels: []int{2}, stores: []string{storeMemory}, noLocal: true, mock: mockInproc, rounds: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := shapeOf(rep)
	if len(got) != 1 {
		t.Fatalf("levels: %+v", got)
	}
	if diff := cmp.Diff([]string{systemFloor, "calf/memory", "calf/memory" + noLocalSuffix}, got[0].Systems); diff != "" {
		t.Errorf("systems (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{10, 10, 10}, got[0].Validated); diff != "" {
		t.Errorf("validated (-want +got):\n%s", diff)
	}

	srv := modeltest.NewServer(w1)
	defer srv.Close()
	for _, remote := range []bool{false, true} {
		stack, err := newCalfStack(t.Context(), storeMemory, t.TempDir(), newHTTPClient(1), srv.URL(), 0, remote)
		if err != nil {
			t.Fatal(err)
		}
		if local := calf.IsLocal(stack.client.Broker()); local == remote {
			t.Errorf("remote %v: the runtime's broker says local %v", remote, local)
		}
		if err := stack.run(t.Context()); err != nil {
			t.Errorf("remote %v: %v", remote, err)
		}
		_ = stack.close()
	}
}
