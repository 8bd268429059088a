package docmem_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/sqlite"
)

// stores returns a new, empty store of each kind the tests run on: memory,
// SQLite and PostgreSQL (the machine's, CALF_TEST_POSTGRES_URL; skipped
// when unreachable unless CALF_TEST_SERVICES is set).
func stores() map[string]func(t testing.TB) store.Store {
	return map[string]func(t testing.TB) store.Store{
		"memory": func(t testing.TB) store.Store {
			s := storemem.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"sqlite": func(t testing.TB) store.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t testing.TB) store.Store {
			u := os.Getenv("CALF_TEST_POSTGRES_URL")
			if u == "" {
				u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, u)
			if err != nil {
				if os.Getenv("CALF_TEST_SERVICES") != "" {
					t.Fatalf("%s is unreachable: %v", u, err)
				}
				t.Skipf("%s is unreachable (set CALF_TEST_POSTGRES_URL): %v", u, err)
			}
			_ = c.Close(ctx)
			schema := fmt.Sprintf("calf_docmem_%016x", rand.Uint64())
			s, err := postgres.Open(context.Background(), u, &postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = s.Close()
				ctx := context.Background()
				if c, err := pgx.Connect(ctx, u); err == nil {
					_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
					_ = c.Close(ctx)
				}
			})
			return s
		},
	}
}

// eachStore runs f on a new store of each kind.
func eachStore(t *testing.T, f func(t *testing.T, s store.Store)) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) { f(t, open(t)) })
	}
}
