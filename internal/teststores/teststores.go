package teststores

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/redis"
	"github.com/calf-go/calf/store/sqlite"
)

// The kinds of store Open knows.
const (
	Memory   = "memory"
	SQLite   = "sqlite"
	Postgres = "postgres"
	Redis    = "redis"
)

// Open returns, for each of kinds, a function that opens a new, empty store
// of that kind, closed (and its data dropped) when the test ends. name
// tells the tests' schemas and key prefixes apart (calf_NAME_…).
func Open(name string, kinds ...string) map[string]func(t testing.TB) store.Store {
	all := map[string]func(t testing.TB) store.Store{
		Memory: func(t testing.TB) store.Store {
			s := storemem.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		SQLite: func(t testing.TB) store.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Postgres: func(t testing.TB) store.Store { return openPostgres(t, name) },
		Redis:    func(t testing.TB) store.Store { return openRedis(t, name) },
	}
	out := make(map[string]func(t testing.TB) store.Store, len(kinds))
	for _, k := range kinds {
		open, ok := all[k]
		if !ok {
			panic(fmt.Sprintf("teststores: unknown kind %q", k))
		}
		out[k] = open
	}
	return out
}

// service returns the URL of a test service from the environment or its
// default, or skips the test when the service is unreachable (fails it
// when CALF_TEST_SERVICES is set).
func service(t testing.TB, env, def string, ping func(ctx context.Context, url string) error) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		u = def
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := ping(ctx, u); err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("%s is unreachable: %v", u, err)
		}
		t.Skipf("%s is unreachable (set %s): %v", u, env, err)
	}
	return u
}

func openPostgres(t testing.TB, name string) store.Store {
	u := service(t, "CALF_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, u string) error {
		c, err := pgx.Connect(ctx, u)
		if err == nil {
			_ = c.Close(ctx)
		}
		return err
	})
	schema := fmt.Sprintf("calf_%s_%016x", name, rand.Uint64())
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
}

func openRedis(t testing.TB, name string) store.Store {
	u := service(t, "CALF_TEST_REDIS_URL", "redis://127.0.0.1:6379/0", func(ctx context.Context, u string) error {
		o, err := goredis.ParseURL(u)
		if err != nil {
			return err
		}
		c := goredis.NewClient(o)
		defer c.Close()
		return c.Ping(ctx).Err()
	})
	prefix := fmt.Sprintf("calf-%s-%016x:", name, rand.Uint64())
	s, err := redis.Open(context.Background(), u, &redis.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		o, _ := goredis.ParseURL(u)
		c := goredis.NewClient(o)
		defer c.Close()
		ctx := context.Background()
		for it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
			c.Del(ctx, it.Val())
		}
	})
	return s
}
