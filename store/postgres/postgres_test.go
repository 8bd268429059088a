package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/storetest"
)

// defaultURLs are tried in order when CALF_TEST_POSTGRES_URL is not set:
// the local server, as the current user, then as postgres and root.
var defaultURLs = []string{
	"postgres://127.0.0.1:5432/test",
	"postgres://postgres@127.0.0.1:5432/test",
	"postgres://root@127.0.0.1:5432/test",
}

var (
	urlOnce  sync.Once
	urlFound string
	urlErr   error
)

// testURL returns the URL of a reachable test database, or skips the test
// (fails it when CALF_TEST_SERVICES is set).
func testURL(t testing.TB) string {
	t.Helper()
	urlOnce.Do(func() {
		urls := defaultURLs
		if u := os.Getenv("CALF_TEST_POSTGRES_URL"); u != "" {
			urls = []string{u}
		}
		var errs []error
		for _, u := range urls {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			conn, err := pgx.Connect(ctx, u)
			if err == nil {
				conn.Close(ctx)
				cancel()
				urlFound = u
				return
			}
			cancel()
			errs = append(errs, err)
		}
		urlErr = errors.Join(errs...)
	})
	if urlErr != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("PostgreSQL is unreachable: %v", urlErr)
		}
		t.Skipf("PostgreSQL is unreachable (set CALF_TEST_POSTGRES_URL): %v", urlErr)
	}
	return urlFound
}

// admin returns a connection of its own to the test database.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testURL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newSchema returns the name of a schema no earlier run has used, and
// drops it when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("calf_test_%016x", rand.Uint64())
	conn := admin(t)
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

func open(t testing.TB, opts *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), testURL(t), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the suite with every subtest on its own Store over
// one schema, the way several workers share a database.
func TestConformance(t *testing.T) {
	schema := newSchema(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, &postgres.Options{Schema: schema})
	})
}

// TestConformanceReopened runs the suite on a schema that was created,
// used and closed before.
func TestConformanceReopened(t *testing.T) {
	schema := newSchema(t)
	first := open(t, &postgres.Options{Schema: schema})
	if _, err := first.Put(t.Context(), "earlier", "r", []byte("x"), 0); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, &postgres.Options{Schema: schema, MaxConns: 2})
	})
}

// TestKeysAreBytes stores ids and kinds that are not text: NUL bytes and
// invalid UTF-8, which List must order byte by byte.
func TestKeysAreBytes(t *testing.T) {
	s := open(t, &postgres.Options{Schema: newSchema(t)})
	kind := "k\x00\xff"
	ids := []string{"a\x00", "a\x00\x01", "a\xff", "a\xff\xff", "a\xc3", "a\xc3\xa9", "a", "b\x00"}
	for _, id := range ids {
		if _, err := s.Put(t.Context(), kind, id, []byte(id), 0); err != nil {
			t.Fatalf("Put(%q): %v", id, err)
		}
	}
	tests := []struct {
		prefix, after string
		want          []string
	}{
		{"", "", []string{"a", "a\x00", "a\x00\x01", "a\xc3", "a\xc3\xa9", "a\xff", "a\xff\xff", "b\x00"}},
		{"a\x00", "", []string{"a\x00", "a\x00\x01"}},
		{"a\xff", "", []string{"a\xff", "a\xff\xff"}},
		{"a\xff", "a\xff", []string{"a\xff\xff"}},
		{"a\xc3", "", []string{"a\xc3", "a\xc3\xa9"}},
		{"a", "a\xc3\xa9", []string{"a\xff", "a\xff\xff"}},
	}
	for _, tt := range tests {
		recs, err := s.List(t.Context(), kind, tt.prefix, tt.after, 0)
		if err != nil {
			t.Fatalf("List(%q, %q): %v", tt.prefix, tt.after, err)
		}
		var got []string
		for _, r := range recs {
			if string(r.Data) != r.ID {
				t.Errorf("record %q holds %q", r.ID, r.Data)
			}
			got = append(got, r.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("List(%q, %q) mismatch (-want +got):\n%s", tt.prefix, tt.after, diff)
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	schema := newSchema(t)
	ctx := t.Context()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s := open(t, &postgres.Options{Schema: schema, Logger: logger})
	if n := strings.Count(logs.String(), "applied migration"); n < 1 {
		t.Errorf("first Open logged %d migrations, want at least 1:\n%s", n, logs.String())
	}
	want := map[string]string{}
	for i := range 20 {
		id := "r" + strconv.Itoa(i)
		v, err := s.Put(ctx, store.KindRun, id, []byte("one"), 0)
		if err == nil {
			_, err = s.Put(ctx, store.KindRun, id, []byte("data "+id), v)
		}
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		want[id] = "data " + id
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	for reopen := range 3 {
		logs.Reset()
		s := open(t, &postgres.Options{Schema: schema, Logger: logger})
		if logs.Len() != 0 {
			t.Errorf("reopen %d logged:\n%s", reopen, logs.String())
		}
		recs, err := s.List(ctx, store.KindRun, "", "", 0)
		if err != nil {
			t.Fatalf("reopen %d: List: %v", reopen, err)
		}
		got := map[string]string{}
		for _, r := range recs {
			if r.Version != 2 {
				t.Errorf("reopen %d: %s at version %d, want 2", reopen, r.ID, r.Version)
			}
			got[r.ID] = string(r.Data)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("reopen %d: records mismatch (-want +got):\n%s", reopen, diff)
		}
		s.Close()
	}
	wantMigrations(t, schema)
}

// wantMigrations checks that the migrations table of schema holds one row
// per version.
func wantMigrations(t *testing.T, schema string) {
	t.Helper()
	var n, maxVersion int
	err := admin(t).QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM `+schema+`.calf_schema_migrations`).Scan(&n, &maxVersion)
	if err != nil {
		t.Fatal(err)
	}
	if n != maxVersion || n < 1 {
		t.Errorf("calf_schema_migrations holds %d rows up to version %d, want one row per version", n, maxVersion)
	}
}

// TestConcurrentOpen has several workers open a new schema at once: the
// advisory lock makes them migrate in turn, so each Open succeeds and the
// migrations run once.
func TestConcurrentOpen(t *testing.T) {
	schema := newSchema(t)
	const workers = 8
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	for i := range workers {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(t.Context(), testURL(t), &postgres.Options{Schema: schema, MaxConns: 1})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	wantMigrations(t, schema)
	if _, err := stores[0].Put(t.Context(), "k", "i", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if rec, err := stores[workers-1].Get(t.Context(), "k", "i"); err != nil || string(rec.Data) != "x" {
		t.Errorf("Get from another Store = %+v, %v", rec, err)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	schema := newSchema(t)
	open(t, &postgres.Options{Schema: schema}).Close()
	if _, err := admin(t).Exec(t.Context(), `INSERT INTO `+schema+`.calf_schema_migrations (version, applied_at) VALUES (1000, now())`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), testURL(t), &postgres.Options{Schema: schema})
	if !errors.Is(err, postgres.ErrSchemaVersion) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema = %v, want %v", err, postgres.ErrSchemaVersion)
	}
}

// TestSchemasAreIndependent has two deployments share a database under
// different schemas.
func TestSchemasAreIndependent(t *testing.T) {
	a := open(t, &postgres.Options{Schema: newSchema(t)})
	b := open(t, &postgres.Options{Schema: newSchema(t)})
	if _, err := a.Put(t.Context(), "k", "i", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), "k", "i"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get from the other schema = %v, want %v", err, store.ErrNotFound)
	}
	if _, err := b.Put(t.Context(), "k", "i", []byte("b"), 0); err != nil {
		t.Errorf("Put in the other schema: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	url := testURL(t)
	tests := []struct {
		name string
		url  string
	}{
		{"malformed", "postgres://[::1"},
		{"no server", "postgres://127.0.0.1:1/test?connect_timeout=2"},
		{"no database", strings.Replace(url, "/test", "/calf_no_such_database", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := postgres.Open(t.Context(), tt.url, nil); err == nil {
				s.Close()
				t.Errorf("Open(%q) succeeded, want an error", tt.url)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if s, err := postgres.Open(ctx, url, nil); !errors.Is(err, context.Canceled) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open with a cancelled context = %v, want %v", err, context.Canceled)
		}
	})
}

func TestNowOption(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC) // microseconds: what the column keeps
	s := open(t, &postgres.Options{Schema: newSchema(t), Now: func() time.Time { return at }})
	if _, err := s.Put(t.Context(), "k", "i", nil, 0); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(t.Context(), "k", "i")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.UpdatedAt.Equal(at) {
		t.Errorf("UpdatedAt = %v, want %v", rec.UpdatedAt, at)
	}
}

// TestUpdateAcrossStores has two Stores, as two workers would, race
// store.Update on one counter: every increment lands exactly once.
func TestUpdateAcrossStores(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, &postgres.Options{Schema: schema}), open(t, &postgres.Options{Schema: schema})}
	const perStore, goroutines = 25, 4
	incr := func(data []byte, exists bool) ([]byte, error) {
		n := 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(data)); err != nil {
				return nil, err
			}
		}
		return strconv.AppendInt(nil, int64(n+1), 10), nil
	}
	var wg sync.WaitGroup
	for _, s := range stores {
		for range goroutines {
			wg.Go(func() {
				for range perStore {
					if _, err := store.Update(t.Context(), s, "counter", "c", incr); err != nil {
						t.Errorf("Update: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	const total = 2 * goroutines * perStore
	rec, err := stores[1].Get(t.Context(), "counter", "c")
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Data) != strconv.Itoa(total) || rec.Version != total {
		t.Errorf("counter = %q at version %d, want %d at version %d", rec.Data, rec.Version, total, total)
	}
}

func newBench(b *testing.B) *postgres.Store {
	return open(b, &postgres.Options{Schema: newSchema(b)})
}

func BenchmarkPut(b *testing.B)    { storetest.PutBenchmark(b, newBench(b)) }
func BenchmarkGet(b *testing.B)    { storetest.GetBenchmark(b, newBench(b)) }
func BenchmarkUpdate(b *testing.B) { storetest.UpdateBenchmark(b, newBench(b)) }

// TestCancelWhileBlocked cancels a write that waits for a row lock another
// session holds: it returns the context's error promptly, and the Store
// works afterwards.
func TestCancelWhileBlocked(t *testing.T) {
	schema := newSchema(t)
	s := open(t, &postgres.Options{Schema: schema, MaxConns: 1})
	if _, err := s.Put(t.Context(), "k", "i", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	tx, err := admin(t).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM `+schema+`.calf_records FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Put(ctx, "k", "i", []byte("y"), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put blocked by a row lock = %v, want %v", err, context.DeadlineExceeded)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Put(t.Context(), "k", "i", []byte("y"), 1); err != nil || v != 2 {
		t.Fatalf("Put after the lock was released = %d, %v; want 2, nil", v, err)
	}
}

// TestCloseDuringOperations closes a Store while goroutines use it: each
// operation either completes or returns store.ErrClosed.
func TestCloseDuringOperations(t *testing.T) {
	s := open(t, &postgres.Options{Schema: newSchema(t), MaxConns: 2})
	var (
		wg      sync.WaitGroup
		started = make(chan struct{}, 4)
	)
	for g := range 4 {
		wg.Go(func() {
			id := "g" + strconv.Itoa(g)
			var v int64
			for i := 0; ; i++ {
				if i == 1 {
					started <- struct{}{}
				}
				next, err := s.Put(t.Context(), "close", id, []byte("x"), v)
				if err == nil {
					_, err = s.Get(t.Context(), "close", id)
				}
				if err != nil {
					if !errors.Is(err, store.ErrClosed) {
						t.Errorf("%s: %v, want %v", id, err, store.ErrClosed)
					}
					return
				}
				v = next
			}
		})
	}
	for range 4 {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
}

// splitStore writes through one Store and reads through another, as a
// worker reads what a different worker wrote.
type splitStore struct {
	writer, reader *postgres.Store
}

func (s splitStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	return s.reader.Get(ctx, kind, id)
}

func (s splitStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	return s.writer.Put(ctx, kind, id, data, version)
}

func (s splitStore) Delete(ctx context.Context, kind, id string, version int64) error {
	return s.writer.Delete(ctx, kind, id, version)
}

func (s splitStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	return s.reader.List(ctx, kind, prefix, after, limit)
}

func (s splitStore) Close() error { return errors.Join(s.writer.Close(), s.reader.Close()) }

// TestConformanceTwoStores runs the suite with writes going through one
// Store and reads through another over the same schema.
func TestConformanceTwoStores(t *testing.T) {
	schema := newSchema(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return splitStore{
			writer: open(t, &postgres.Options{Schema: schema}),
			reader: open(t, &postgres.Options{Schema: schema}),
		}
	})
}
