package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/calf-go/calf/internal/chaos"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/sqlite"
)

// benchStoreEnv chooses the store of the footprint benchmarks of waiting
// runs and pending timers (BenchmarkApprovalsWaiting,
// BenchmarkSignalsWaiting, BenchmarkTimersPending): unset or "sqlite", a
// SQLite file; "postgres", a PostgreSQL of the benchmark's own, which
// package chaos starts on a free port outside the ephemeral range, in a
// temporary directory (never the machine's shared server). PostgreSQL is
// a process of its own: its memory is not in the RSS the benchmarks
// report.
const benchStoreEnv = "CALF_BENCH_STORE"

// openBenchStore opens the store benchStoreEnv names, closed when b ends.
func openBenchStore(b *testing.B) store.Store {
	b.Helper()
	var (
		s   store.Store
		err error
	)
	switch kind := os.Getenv(benchStoreEnv); kind {
	case "", "sqlite":
		s, err = sqlite.Open(filepath.Join(b.TempDir(), "calf.db"), nil)
	case "postgres":
		chaos.NeedPostgres(b)
		s, err = postgres.Open(b.Context(), chaos.StartPostgres(b), nil)
	default:
		b.Fatalf("%s=%s: the store is sqlite or postgres", benchStoreEnv, kind)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
