package agent_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
)

// BenchmarkTimersPending keeps b.N timers pending on one SQLite process
// (a private PostgreSQL with CALF_BENCH_STORE=postgres) that fires timers
// (its loop reads the front of the index): the time to
// start one, and then what they cost the process: goroutines, heap and
// resident memory, which should not grow with b.N (run with
// -benchtime=1000000x for the figure of the benchmarks page).
func BenchmarkTimersPending(b *testing.B) {
	ctx := context.Background()
	mb := memory.New(nil)
	defer mb.Close()
	st := openBenchStore(b)
	c := calf.NewClient(mb, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{TimerPoll: 100 * time.Millisecond})
	rt.ServeTimers()
	runtime.GC()
	idle := runtime.NumGoroutine()
	due := time.Now().Add(time.Hour)
	b.ResetTimer()
	for i := range b.N {
		if _, err := rt.StartTimer(ctx, agent.Timer{ID: "bench/" + strconv.Itoa(i), Due: due.Add(time.Duration(i) * time.Millisecond), Channel: "bench.fired"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	time.Sleep(300 * time.Millisecond) // a few passes of the loop over the index
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(runtime.NumGoroutine()-idle), "goroutines")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(rssBytes(b))/(1<<20), "RSS-MiB")
}
