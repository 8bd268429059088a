package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// BenchmarkApprovalsWaiting submits b.N runs whose tool call waits for
// approval, on the memory broker and SQLite (a private PostgreSQL with
// CALF_BENCH_STORE=postgres), and reports what the waiting runs cost once
// every request is stored and the handlers are idle:
// goroutines above those of the idle process, the Go heap in use, and the
// process's resident memory (which includes SQLite's page cache). Run it with
// -benchtime 10000x for the 10,000 runs of docs/benchmarks.md.
func BenchmarkApprovalsWaiting(b *testing.B) {
	benchWaiting(b, "approval", func(ctx context.Context, rt *agent.Runtime) (func(id string) error, error) {
		add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in benchOperands) (int, error) {
			return in.A + in.B, nil
		}))
		a := agent.Must(agent.New("calculator", benchW1Model(), &agent.Options{
			Tools: []tool.Tool{add}, Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
		}))
		submit := func(id string) error {
			_, err := a.Submit(ctx, rt, "add 2 and 3", &agent.RunOptions{RunID: id})
			return err
		}
		return submit, a.Serve(ctx, rt, nil)
	}, func(ctx context.Context, rt *agent.Runtime) (int, error) {
		// Count the pending requests a page at a time: approval.List
		// would hold every request, and an entry for every run, at once,
		// and the observer's memory would be counted as the runs'.
		n, after := 0, ""
		for {
			recs, err := rt.Store().List(ctx, approval.Kind, "", after, 10000)
			if err != nil || len(recs) == 0 {
				return n, err
			}
			for _, rec := range recs {
				a, err := approval.Decode(rec.Data)
				if err != nil {
					return n, err
				}
				if a.Status == approval.Pending {
					n++
				}
			}
			after = recs[len(recs)-1].ID
		}
	})
}

// BenchmarkSignalsWaiting is BenchmarkApprovalsWaiting for runs of a custom
// agent whose step waits for a signal (StepContext.WaitSignal, no timeout).
func BenchmarkSignalsWaiting(b *testing.B) {
	benchWaiting(b, "a signal", func(ctx context.Context, rt *agent.Runtime) (func(id string) error, error) {
		c, err := agent.NewCustom("waiter", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
			var v string
			if _, err := sc.WaitSignal("go", 0, &v); err != nil {
				return "", err
			}
			return v, nil
		}, nil)
		if err != nil {
			return nil, err
		}
		submit := func(id string) error {
			_, err := c.Submit(ctx, rt, "go", &agent.RunOptions{RunID: id})
			return err
		}
		return submit, c.Serve(ctx, rt, nil)
	}, func(ctx context.Context, rt *agent.Runtime) (int, error) {
		n, after := 0, ""
		for {
			recs, err := rt.Store().List(ctx, signals.KindWaiter, "", after, 10000)
			if err != nil || len(recs) == 0 {
				return n, err
			}
			n += len(recs)
			after = recs[len(recs)-1].ID
		}
	})
}

// benchWaiting submits b.N runs of what serve serves, waits until waiting
// counts them all, and reports what they cost (see
// BenchmarkApprovalsWaiting).
func benchWaiting(b *testing.B, what string,
	serve func(context.Context, *agent.Runtime) (func(id string) error, error),
	waiting func(context.Context, *agent.Runtime) (int, error)) {
	ctx := context.Background()
	mb := memory.New(nil)
	defer mb.Close()
	st := openBenchStore(b)
	c := calf.NewClient(mb, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)
	submit, err := serve(ctx, rt)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	idle := runtime.NumGoroutine()
	stopWatch := watchPeak(b)
	b.ResetTimer()
	for i := range b.N {
		if err := submit("w" + strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	testwait.ForErr(b, 10*time.Minute, "every run to wait for "+what, func() error {
		n, err := waiting(ctx, rt)
		if err == nil && n != b.N {
			err = fmt.Errorf("%d of %d runs are waiting for %s", n, b.N, what)
		}
		return err
	})
	b.StopTimer()
	stopWatch()
	// Let the handlers that published the requests return.
	drain, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := mb.Drain(drain); err != nil {
		b.Fatal(err)
	}
	// The broker's idle handler goroutines end after a second without
	// work; what is left is what the waiting runs hold.
	time.Sleep(2 * time.Second)
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(runtime.NumGoroutine()-idle), "goroutines")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(rssBytes(b))/(1<<20), "RSS-MiB")
	logFootprint(b)
}

// rssBytes returns the resident memory of the process, from /proc.
func rssBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status here")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				return kb << 10
			}
		}
	}
	b.Skip("no VmRSS in /proc/self/status")
	return 0
}
