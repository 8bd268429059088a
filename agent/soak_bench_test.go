package agent_test

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
)

// rssKB returns the process's resident set size in KiB, from
// /proc/self/status (0 where there is none).
func rssKB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func fileSize(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BenchmarkSoakW1 runs W1 back to back (CALF_SOAK_RUNS runs, default
// 200,000) with a short retention: every 5,000 runs it sweeps the runs
// that ended more than 200 ms ago. It logs the RSS (after a GC) and,
// on SQLite, the size of the database files every tenth of the runs, and
// reports the growth of each over the second half of the soak: flat
// means the footprint is bounded. Run it with -benchtime 1x.
func BenchmarkSoakW1(b *testing.B) {
	runs := 200_000
	if v, err := strconv.Atoi(os.Getenv("CALF_SOAK_RUNS")); err == nil && v > 0 {
		runs = v
	}
	const retention = 200 * time.Millisecond
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				var st store.Store
				var files []string
				if kind == "memory" {
					st = storemem.New()
				} else {
					dir := b.TempDir()
					db := filepath.Join(dir, "soak.db")
					s, err := sqlite.Open(db, nil)
					if err != nil {
						b.Fatal(err)
					}
					st, files = s, []string{db, db + "-wal", db + "-shm"}
				}
				a, rt := benchW1(b, st, benchW1Model())
				ctx := b.Context()
				var rssHalf, sizeHalf int64
				for i := 1; i <= runs; i++ {
					if _, err := a.Run(ctx, rt, "add 2 and 3", nil); err != nil {
						b.Fatal(err)
					}
					if i%5000 == 0 {
						if _, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now().Add(-retention)}); err != nil {
							b.Fatal(err)
						}
					}
					if i%(runs/10) == 0 {
						runtime.GC()
						rss, size := rssKB(), fileSize(files...)
						b.Logf("%s: after %d runs: RSS %d MiB, database %d MiB", kind, i, rss>>10, size>>20)
						if i == runs/2 {
							rssHalf, sizeHalf = rss, size
						}
						if i == runs {
							b.ReportMetric(float64(rss-rssHalf)/1024, "MiB-RSS-growth-2nd-half")
							b.ReportMetric(float64(size-sizeHalf)/(1<<20), "MiB-db-growth-2nd-half")
						}
					}
				}
				for _, k := range []string{store.KindRun, store.KindToolResult, store.KindProcessed, store.KindSession, approval.Kind} {
					recs, err := st.List(ctx, k, "", "", 0)
					if err == nil && len(recs) > 0 {
						b.Logf("%s: %d %s records left", kind, len(recs), k)
					}
				}
				_ = st.Close()
			}
		})
	}
}
