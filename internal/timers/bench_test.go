package timers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/chaos"
	"github.com/calf-go/calf/internal/timers"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/sqlite"
)

// benchStores open the stores of the benchmarks: a SQLite file, and a
// PostgreSQL of the benchmark's own (package chaos starts it on a free
// port, in a temporary directory), opened once per benchmark.
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"sqlite", func(b *testing.B) store.Store {
		s, err := sqlite.Open(filepath.Join(b.TempDir(), "calf.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) store.Store {
		chaos.NeedPostgres(b)
		s, err := postgres.Open(b.Context(), chaos.StartPostgres(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// firings records when each timer's event is delivered.
type firings struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firings) get(id string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[id]
	return t, ok
}

// BenchmarkTimerLateness measures how late timers fire across a restart
// of the one process that fires them, with the defaults (a poll of 1 s, a
// lease of 5 s): each iteration starts 100 timers of each class below
// (in a lead of 3 s), stops the firing process (a firing loop,
// timers.Service.Run) 1 s before the first is due, starts another
// process's loop 2 s later, and
// waits until every timer has fired. The classes, each reported as p50
// and p99 in milliseconds:
//
//   - down: due while no process runs (spread over the second before the
//     restart); fired − due ("down-ms"), and fired − restart
//     ("down-after-restart-ms");
//   - after: due in the second after the restart ("after-ms");
//   - held: due as the process stopped, which had taken them (their
//     index entries leased to it, as when it dies while firing them):
//     fired − due ("held-ms"), bounded by the lease and a poll.
//
// ns/op is the length of an iteration. Run it with -benchtime 5x.
func BenchmarkTimerLateness(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			c := calf.NewClient(memory.New(nil), nil)
			b.Cleanup(func() { _ = c.Close() })
			f := &firings{at: map[string]time.Time{}}
			if err := c.Handle(b.Context(), "t.fired", func(_ context.Context, m *calf.Message) error {
				f.mu.Lock()
				f.at[m.ID] = time.Now()
				f.mu.Unlock()
				return nil
			}, nil); err != nil {
				b.Fatal(err)
			}
			lateness := map[string][]time.Duration{}
			for i := range b.N {
				for class, ds := range latenessCycle(b, s, c, f, i) {
					lateness[class] = append(lateness[class], ds...)
				}
			}
			for _, class := range slices.Sorted(func(yield func(string) bool) {
				for k := range lateness {
					if !yield(k) {
						return
					}
				}
			}) {
				ds := lateness[class]
				slices.Sort(ds)
				b.ReportMetric(ms(ds[len(ds)/2]), class+"-p50-ms")
				b.ReportMetric(ms(ds[(len(ds)*99)/100]), class+"-p99-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latenessCycle is one iteration of BenchmarkTimerLateness.
func latenessCycle(b *testing.B, s store.Store, c *calf.Client, f *firings, iter int) map[string][]time.Duration {
	const perClass = 100
	ctx := b.Context()
	first := timers.New(s, c, timers.Options{Owner: fmt.Sprintf("first-%d", iter)})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- first.Run(runCtx) }()

	// The timers are started in the lead time before the stop: 3 s, so
	// that starting them (600 writes) ends before the first is due even
	// on a slow store.
	start := time.Now()
	kill := start.Add(3 * time.Second)
	restart := kill.Add(2 * time.Second)
	type pending struct {
		class, id string
		due       time.Time
	}
	var all []pending
	add := func(class string, due time.Time) {
		id := fmt.Sprintf("%d/%s/%03d", iter, class, len(all))
		if _, err := first.Start(ctx, timers.Timer{ID: id, Due: due, Channel: "t.fired"}); err != nil {
			b.Fatal(err)
		}
		all = append(all, pending{class, id, due})
	}
	for i := range perClass {
		spread := time.Duration(i) * time.Second / perClass
		add("down", kill.Add(time.Second+spread))
		add("after", restart.Add(spread))
		add("held", kill.Add(time.Duration(i)*time.Microsecond))
	}
	if late := time.Since(kill.Add(-10 * time.Millisecond)); late > 0 {
		b.Fatalf("starting the timers took %s past the stop: the first process fired the held ones", late)
	}
	// The first process stops just before the held timers fall due,
	// and leaves them leased to it, as if it had taken them and died.
	time.Sleep(time.Until(kill.Add(-10 * time.Millisecond)))
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Until(kill))
	entries, err := s.List(ctx, timers.KindDue, "", "", 0)
	if err != nil {
		b.Fatal(err)
	}
	l, _ := json.Marshal(map[string]any{"owner": fmt.Sprintf("first-%d", iter), "until": kill.Add(timers.DefaultLease)})
	for _, e := range entries {
		if strings.Contains(e.ID, fmt.Sprintf("/%d/held/", iter)) {
			if _, err := s.Put(ctx, timers.KindDue, e.ID, l, e.Version); err != nil {
				b.Fatal(err)
			}
		}
	}

	// No process fires timers until the restart.
	time.Sleep(time.Until(restart))
	second := timers.New(s, c, timers.Options{Owner: fmt.Sprintf("second-%d", iter)})
	runCtx, stop = context.WithCancel(ctx)
	go func() { done <- second.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()
	deadline := time.Now().Add(time.Minute)
	out := map[string][]time.Duration{}
	for _, p := range all {
		var at time.Time
		for {
			var ok bool
			if at, ok = f.get(p.id); ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("timer %s (due %s) did not fire within a minute", p.id, p.due.Format(time.TimeOnly))
			}
			time.Sleep(5 * time.Millisecond)
		}
		out[p.class] = append(out[p.class], at.Sub(p.due))
		if p.class == "down" {
			out["down-after-restart"] = append(out["down-after-restart"], at.Sub(restart))
		}
	}
	return out
}

// BenchmarkTimersPendingStores keeps b.N timers pending in a store, SQLite
// or a private PostgreSQL, with a firing loop running on it (polling
// every 100 ms, as agent's BenchmarkTimersPending): the time to start
// one (ns/op), and then what they cost the process: goroutines, heap and
// resident memory, which should not grow with b.N. Run it with
// -benchtime=100000x.
func BenchmarkTimersPendingStores(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			ctx := context.Background()
			s := bs.open(b)
			c := calf.NewClient(memory.New(nil), nil)
			defer c.Close()
			svc := timers.New(s, c, timers.Options{Poll: 100 * time.Millisecond})
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- svc.Run(runCtx) }()
			defer func() {
				stop()
				<-done
			}()
			runtime.GC()
			idle := runtime.NumGoroutine()
			due := time.Now().Add(time.Hour)
			b.ResetTimer()
			for i := range b.N {
				if _, err := svc.Start(ctx, timers.Timer{ID: "bench/" + strconv.Itoa(i), Due: due.Add(time.Duration(i) * time.Millisecond), Channel: "bench.fired"}); err != nil {
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
			// The time of one pass of the loop over the index, with
			// nothing due: what the pending timers cost it.
			t0 := time.Now()
			const passes = 20
			for range passes {
				if _, _, err := svc.Fire(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/passes, "µs/pass")
		})
	}
}

// rssBytes returns the process's resident memory (VmRSS).
func rssBytes(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
