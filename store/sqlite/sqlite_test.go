package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/store/storetest"
)

func open(t testing.TB, path string, opts *sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "calf.db"), nil)
	})
}

// TestConformanceReopened runs the suite on a file that was created, used
// and closed before.
func TestConformanceReopened(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "calf.db")
		first, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if _, err := first.Put(t.Context(), "earlier", "r", []byte("x"), 0); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if err := first.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return open(t, path, nil)
	})
}

// TestConformanceSharedFile runs the suite with every subtest on its own
// Store over one file, the way several processes share a database.
func TestConformanceSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, path, nil)
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "calf.db")
	ctx := t.Context()
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	want := map[string]string{}
	for i := range 50 {
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
		s := open(t, path, nil)
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
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}

	// Migrations ran once, whatever the number of opens.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, maxVersion int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if n != maxVersion || n < 1 {
		t.Errorf("schema_migrations holds %d rows up to version %d, want one row per version", n, maxVersion)
	}
}

func TestOpenSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s := open(t, path, &sqlite.Options{Logger: logger})
	if n := strings.Count(logs.String(), "applied migration"); n < 1 {
		t.Errorf("first Open logged %d migrations, want at least 1:\n%s", n, logs.String())
	}
	s.Close()
	logs.Reset()
	open(t, path, &sqlite.Options{Logger: logger})
	if logs.Len() != 0 {
		t.Errorf("reopen logged:\n%s", logs.String())
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	for _, full := range []bool{false, true} {
		s := open(t, path, &sqlite.Options{FullSync: full})
		n, err := sqlite.Synchronous(s)
		if want := map[bool]int{false: 1, true: 2}[full]; err != nil || n != want {
			t.Errorf("FullSync %v: synchronous = %d, %v; want %d", full, n, err, want)
		}
		if _, err := s.Put(t.Context(), "k", "full", []byte("x"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
			t.Errorf("FullSync %v: Put: %v", full, err)
		}
	}
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	open(t, filepath.Join(dir, "calf.db"), nil)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("directory mode %v, want no access for group and others", perm)
	}
}

func TestOpenPathWithSpecialCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?with#odd%chars", "x?y=1.db")
	s := open(t, path, nil)
	if _, err := s.Put(t.Context(), "k", "i", []byte("x"), 0); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database is not at the path given: %v", err)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	s := open(t, path, nil)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (1000, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(path, nil); !errors.Is(err, sqlite.ErrSchemaVersion) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema = %v, want %v", err, sqlite.ErrSchemaVersion)
	}
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a database, and long enough to have a header of sorts......................................................"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", filepath.Join(file, "calf.db"), file} {
		if s, err := sqlite.Open(path, nil); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", path)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		xdg  string
		want string
	}{
		{"/data/xdg", "/data/xdg/calf/calf.db"},
		{"", filepath.Join(home, ".local", "share", "calf", "calf.db")},
		{"relative/dir", filepath.Join(home, ".local", "share", "calf", "calf.db")},
	}
	for _, tt := range tests {
		t.Setenv("XDG_DATA_HOME", tt.xdg)
		got, err := sqlite.DefaultPath()
		if err != nil || got != tt.want {
			t.Errorf("XDG_DATA_HOME=%q: DefaultPath() = %q, %v; want %q", tt.xdg, got, err, tt.want)
		}
	}
}

func TestNowOption(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s := open(t, filepath.Join(t.TempDir(), "calf.db"), &sqlite.Options{Now: func() time.Time { return at }})
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

// TestConcurrentWritersAcrossStores has two Stores on one file, as two
// processes would, write at once: the busy timeout, not the caller, must
// absorb the lock contention.
func TestConcurrentWritersAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	stores := []*sqlite.Store{open(t, path, nil), open(t, path, nil)}
	var wg sync.WaitGroup
	for i, s := range stores {
		for g := range 4 {
			wg.Go(func() {
				for n := range 50 {
					id := strconv.Itoa(i) + "-" + strconv.Itoa(g) + "-" + strconv.Itoa(n)
					if _, err := s.Put(t.Context(), "k", id, []byte(id), 0); err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if _, err := s.Get(t.Context(), "k", id); err != nil {
						t.Errorf("Get: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	recs, err := stores[0].List(t.Context(), "k", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*4*50 {
		t.Errorf("List returned %d records, want %d", len(recs), 2*4*50)
	}
}

func newBench(b *testing.B) *sqlite.Store {
	return open(b, filepath.Join(b.TempDir(), "calf.db"), nil)
}

func BenchmarkPut(b *testing.B)    { storetest.PutBenchmark(b, newBench(b)) }
func BenchmarkGet(b *testing.B)    { storetest.GetBenchmark(b, newBench(b)) }
func BenchmarkUpdate(b *testing.B) { storetest.UpdateBenchmark(b, newBench(b)) }

// Puts that arrive while the write connection is busy are committed
// together, and each gets its own outcome: no update is lost, every
// conflict is reported, and what was committed is there after a reopen.
func TestBatchedPuts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	s := open(t, path, nil)
	const writers, increments = 40, 25
	storetest.Counters(t, s, writers, increments)
	batches, puts := sqlite.BatchStats(s)
	if batches == 0 || puts < 2*batches {
		t.Errorf("%d batches of %d Puts: the Puts were not committed together", batches, puts)
	}
	t.Logf("%d batches, %.1f Puts each", batches, float64(puts)/float64(max(batches, 1)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.CheckCounters(t, open(t, path, nil), writers, increments)
}

// Stores opened at once on the same new file all open: the first
// connection's switch to the WAL journal, which another can refuse at
// once with SQLITE_BUSY, is tried again within the busy timeout.
func TestOpenAtOnce(t *testing.T) {
	for i := range 20 {
		path := filepath.Join(t.TempDir(), "at-once-"+strconv.Itoa(i)+".db")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				s, err := sqlite.Open(path, nil)
				if err != nil {
					errs <- err
					return
				}
				errs <- s.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}
