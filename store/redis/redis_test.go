package redis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/redis"
	"github.com/calf-go/calf/store/storetest"
)

const defaultTestURL = "redis://127.0.0.1:6379/0"

// realRedis returns the URL of the Redis server the tests use
// (CALF_TEST_REDIS_URL, else the local default) and a fresh key prefix
// whose keys are deleted when the test ends. It skips the test when the
// server is unreachable, unless CALF_TEST_SERVICES is set.
func realRedis(t testing.TB) (url, prefix string) {
	t.Helper()
	url = os.Getenv("CALF_TEST_REDIS_URL")
	if url == "" {
		url = defaultTestURL
	}
	admin := adminClient(t, url)
	prefix = fmt.Sprintf("calftest:%016x:", rand.Uint64())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := admin.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup: scan: %v", err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := admin.Del(ctx, keys[:n]...).Err(); err != nil {
				t.Errorf("cleanup: del: %v", err)
				return
			}
			keys = keys[n:]
		}
	})
	return url, prefix
}

// adminClient connects to url for the test's own requests, skipping or
// failing the test when the server is unreachable.
func adminClient(t testing.TB, url string) *goredis.Client {
	t.Helper()
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("CALF_TEST_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("Redis at %s unreachable: %v", url, err)
		}
		t.Skipf("Redis at %s unreachable (set CALF_TEST_SERVICES to fail instead): %v", url, err)
	}
	return c
}

func open(t testing.TB, url string, opts *redis.Options) *redis.Store {
	t.Helper()
	s, err := redis.Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func miniURL(m *miniredis.Miniredis) string { return "redis://" + m.Addr() + "/0" }

func TestConformanceRedis(t *testing.T) {
	url, prefix := realRedis(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, url, &redis.Options{KeyPrefix: prefix})
	})
}

func TestConformanceMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, miniURL(m), nil)
	})
}

// TestConformanceNew runs the suite on stores made with New over one
// client the test owns.
func TestConformanceNew(t *testing.T) {
	m := miniredis.RunT(t)
	client := goredis.NewClient(&goredis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	storetest.Run(t, func(t *testing.T) store.Store {
		s := redis.New(client, &redis.Options{KeyPrefix: "new:"})
		t.Cleanup(func() { s.Close() })
		return s
	})
	// Closing the stores left the caller's client open.
	if err := client.Ping(t.Context()).Err(); err != nil {
		t.Errorf("client after the stores closed: %v", err)
	}
}

// TestKeyLayout checks the documented keys: a hash per record with fields
// v, d and t, and a sorted set of ids per kind, all under the prefix.
func TestKeyLayout(t *testing.T) {
	m := miniredis.RunT(t)
	now := time.Unix(1700000000, 123456789)
	tests := []struct {
		name   string
		opts   *redis.Options
		prefix string
	}{
		{"default prefix", nil, "calf:"},
		{"own prefix", &redis.Options{KeyPrefix: "app1/", Now: func() time.Time { return now }}, "app1/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, miniURL(m), tt.opts)
			if _, err := s.Put(t.Context(), "run", "r:1", []byte("data"), 0); err != nil {
				t.Fatalf("Put: %v", err)
			}
			rec := tt.prefix + "r:3:run:r:1"
			if got := m.HGet(rec, "v"); got != "1" {
				t.Errorf("HGET %s v = %q, want 1", rec, got)
			}
			if got := m.HGet(rec, "d"); got != "data" {
				t.Errorf("HGET %s d = %q, want data", rec, got)
			}
			t0, err := strconv.ParseInt(m.HGet(rec, "t"), 10, 64)
			if err != nil {
				t.Errorf("HGET %s t: %v", rec, err)
			}
			if tt.opts != nil && t0 != now.UnixNano() {
				t.Errorf("HGET %s t = %d, want %d from Options.Now", rec, t0, now.UnixNano())
			}
			got, err := s.Get(t.Context(), "run", "r:1")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.UpdatedAt.UnixNano() != t0 {
				t.Errorf("UpdatedAt = %d, stored %d", got.UpdatedAt.UnixNano(), t0)
			}
			members, err := m.ZMembers(tt.prefix + "k:run")
			if err != nil || !cmp.Equal(members, []string{"r:1"}) {
				t.Errorf("ZRANGE %sk:run = %q, %v; want [r:1]", tt.prefix, members, err)
			}
			if err := s.Delete(t.Context(), "run", "r:1", 0); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			for _, k := range m.Keys() {
				if strings.HasPrefix(k, tt.prefix) {
					t.Errorf("key %q left after the only record was deleted", k)
				}
			}
		})
	}
}

// TestColonsDoNotCollide stores records whose kind and id joined with ':'
// would be the same string, and records under kinds that differ only
// where a ':' falls.
func TestColonsDoNotCollide(t *testing.T) {
	m := miniredis.RunT(t)
	s := open(t, miniURL(m), nil)
	ctx := t.Context()
	keys := [][2]string{
		{"a", "b:c"}, {"a:b", "c"}, {"a:b:c", "d"}, {"a", "b:c:d"}, {"a:b", "c:d"},
		{"1:a", "b"}, {"1", "a:b"}, {"k", ":"}, {"k:", ":"}, {":", "k"}, {"3:r", "x"},
	}
	for i, k := range keys {
		if _, err := s.Put(ctx, k[0], k[1], []byte(strconv.Itoa(i)), 0); err != nil {
			t.Fatalf("Put(%q, %q): %v", k[0], k[1], err)
		}
	}
	for i, k := range keys {
		rec, err := s.Get(ctx, k[0], k[1])
		if err != nil || rec.Version != 1 || string(rec.Data) != strconv.Itoa(i) {
			t.Errorf("Get(%q, %q) = version %d, %q, %v; want version 1, %q", k[0], k[1], rec.Version, rec.Data, err, strconv.Itoa(i))
		}
	}
	for _, kind := range []string{"a", "a:b", "k", "1"} {
		recs, err := s.List(ctx, kind, "", "", 0)
		if err != nil {
			t.Fatalf("List(%q): %v", kind, err)
		}
		var got, want []string
		for _, r := range recs {
			got = append(got, r.ID)
		}
		for _, k := range keys {
			if k[0] == kind {
				want = append(want, k[1])
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("List(%q) ids mismatch (-want +got):\n%s", kind, diff)
		}
	}
}

// TestTwoStoresRace has two Stores, each with its own connections, race
// store.Update on one counter; every increment must count exactly once.
func TestTwoStoresRace(t *testing.T) {
	m := miniredis.RunT(t)
	backends := []struct {
		name string
		url  func(t *testing.T) (string, string)
	}{
		{"miniredis", func(*testing.T) (string, string) { return miniURL(m), "" }},
		{"redis", func(t *testing.T) (string, string) { return realRedis(t) }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url, prefix := b.url(t)
			stores := []*redis.Store{
				open(t, url, &redis.Options{KeyPrefix: prefix}),
				open(t, url, &redis.Options{KeyPrefix: prefix}),
			}
			kind := fmt.Sprintf("race-%016x", rand.Uint64())
			const perStore, workers = 100, 4
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range len(stores) * workers {
				s := stores[i%len(stores)]
				wg.Go(func() {
					<-start
					for n := 0; n < perStore; {
						_, err := store.Update(t.Context(), s, kind, "counter", increment)
						if errors.Is(err, store.ErrConflict) {
							continue // Update gave up after its retries: try again
						}
						if err != nil {
							t.Errorf("Update: %v", err)
							return
						}
						n++
					}
				})
			}
			close(start)
			wg.Wait()
			want := len(stores) * workers * perStore
			for i, s := range stores {
				rec, err := s.Get(t.Context(), kind, "counter")
				if err != nil {
					t.Fatalf("store %d: Get: %v", i, err)
				}
				if string(rec.Data) != strconv.Itoa(want) || rec.Version != int64(want) {
					t.Errorf("store %d: counter = %q at version %d, want %d at version %d", i, rec.Data, rec.Version, want, want)
				}
			}
		})
	}
}

func increment(data []byte, exists bool) ([]byte, error) {
	n := 0
	if exists {
		var err error
		if n, err = strconv.Atoi(string(data)); err != nil {
			return nil, err
		}
	}
	return strconv.AppendInt(nil, int64(n+1), 10), nil
}

// TestReconnectAfterKill kills the Store's connections on the server and
// checks that the next operations succeed on new ones.
func TestReconnectAfterKill(t *testing.T) {
	url, prefix := realRedis(t)
	admin := adminClient(t, url)
	name := fmt.Sprintf("calftest-%016x", rand.Uint64())
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s := open(t, url+sep+"client_name="+name, &redis.Options{KeyPrefix: prefix})
	ctx := t.Context()
	v, err := s.Put(ctx, "kill", "r", []byte("before"), 0)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}

	for round := range 3 {
		killed := killClients(t, admin, name)
		if killed == 0 {
			t.Fatalf("round %d: no connection named %s to kill", round, name)
		}
		data := []byte("after kill " + strconv.Itoa(round))
		if v, err = s.Put(ctx, "kill", "r", data, v); err != nil {
			t.Fatalf("round %d: Put after killing %d connections: %v", round, killed, err)
		}
		rec, err := s.Get(ctx, "kill", "r")
		if err != nil || string(rec.Data) != string(data) || rec.Version != v {
			t.Fatalf("round %d: Get = %q at %d, %v; want %q at %d", round, rec.Data, rec.Version, err, data, v)
		}
		killClients(t, admin, name)
		if recs, err := s.List(ctx, "kill", "", "", 0); err != nil || len(recs) != 1 {
			t.Fatalf("round %d: List after kill = %v, %v; want one record", round, recs, err)
		}
	}
}

// killClients closes the server side of every connection named name and
// returns how many there were.
func killClients(t *testing.T, admin *goredis.Client, name string) int {
	t.Helper()
	list, err := admin.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		fields := strings.Fields(line)
		if !slices.Contains(fields, "name="+name) {
			continue
		}
		for _, f := range fields {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := admin.Do(t.Context(), "CLIENT", "KILL", "ID", id).Err(); err != nil {
					t.Fatalf("CLIENT KILL ID %s: %v", id, err)
				}
				n++
			}
		}
	}
	return n
}

// TestReconnectAfterRestart restarts the server under the Store.
func TestReconnectAfterRestart(t *testing.T) {
	m := miniredis.RunT(t)
	s := open(t, miniURL(m), nil)
	ctx := t.Context()
	v, err := s.Put(ctx, "restart", "r", []byte("one"), 0)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	m.Close()
	var opErr *net.OpError
	if _, err := s.Get(ctx, "restart", "r"); !errors.As(err, &opErr) || !strings.HasPrefix(err.Error(), "store/redis: get") {
		t.Errorf("Get with the server down = %v, want a wrapped connection error", err)
	}
	if err := m.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if _, err := s.Put(ctx, "restart", "r", []byte("two"), v); err != nil {
		t.Fatalf("Put after restart: %v", err)
	}
	rec, err := s.Get(ctx, "restart", "r")
	if err != nil || string(rec.Data) != "two" || rec.Version != 2 {
		t.Errorf("Get after restart = %q at %d, %v; want two at 2", rec.Data, rec.Version, err)
	}
}

func TestOpenErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := l.Addr().String()
	l.Close()
	tests := []struct {
		name   string
		url    string
		wantAs func(error) bool
	}{
		{"bad scheme", "http://127.0.0.1:6379/0", nil},
		{"bad db", "redis://127.0.0.1:6379/notanumber", nil},
		{"refused", "redis://" + closedAddr + "/0?max_retries=-1", func(err error) bool {
			var op *net.OpError
			return errors.As(err, &op)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := redis.Open(t.Context(), tt.url, nil)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tt.url)
			}
			if !strings.HasPrefix(err.Error(), "store/redis: open") {
				t.Errorf("Open error %q lacks the package's context", err)
			}
			if tt.wantAs != nil && !tt.wantAs(err) {
				t.Errorf("Open error %v does not wrap the connection error", err)
			}
		})
	}
}

// silentServer accepts connections and reads from them but never answers,
// like a server that hangs.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadByte(); err != nil {
						return
					}
				}
			})
		}
	})
	return l.Addr().String()
}

// TestCancelWhileWaiting cancels operations that wait on a server that
// does not answer: each returns the context's error, long before the
// client's read timeout.
func TestCancelWhileWaiting(t *testing.T) {
	addr := silentServer(t)
	client := goredis.NewClient(&goredis.Options{
		Addr: addr, ReadTimeout: time.Hour, WriteTimeout: time.Hour, DialTimeout: time.Hour,
		MaxRetries: -1, Protocol: 2, DisableIdentity: true,
	})
	// Runs before the server's cleanup, so that the waiting requests end.
	t.Cleanup(func() { client.Close() })
	s := redis.New(client, nil)
	ops := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, "k", "i"); return err }},
		{"Put", func(ctx context.Context) error { _, err := s.Put(ctx, "k", "i", []byte("x"), 0); return err }},
		{"Delete", func(ctx context.Context) error { return s.Delete(ctx, "k", "i", 1) }},
		{"List", func(ctx context.Context) error { _, err := s.List(ctx, "k", "", "", 0); return err }},
		{"Open", func(ctx context.Context) error {
			_, err := redis.Open(ctx, "redis://"+addr+"/0?protocol=2", nil)
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				ctx  func() (context.Context, context.CancelFunc)
				want error
			}{
				{"cancel", func() (context.Context, context.CancelFunc) {
					ctx, cancel := context.WithCancel(t.Context())
					time.AfterFunc(20*time.Millisecond, cancel)
					return ctx, cancel
				}, context.Canceled},
				{"deadline", func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(t.Context(), 20*time.Millisecond)
				}, context.DeadlineExceeded},
			} {
				ctx, cancel := c.ctx()
				err := op.fn(ctx)
				cancel()
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %s = %v, want %v", c.name, op.name, err, c.want)
				}
			}
		})
	}
}

func TestClosedKeepsCallersClient(t *testing.T) {
	m := miniredis.RunT(t)
	client := goredis.NewClient(&goredis.Options{Addr: m.Addr()})
	defer client.Close()
	s := redis.New(client, nil)
	if _, err := s.Put(t.Context(), "k", "i", []byte("x"), 0); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Get(t.Context(), "k", "i"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close = %v, want %v", err, store.ErrClosed)
	}
	if got, err := client.HGet(t.Context(), "calf:r:1:k:i", "d").Result(); err != nil || got != "x" {
		t.Errorf("client after Close: HGET = %q, %v; want x", got, err)
	}
}

func benchStores(b *testing.B) map[string]store.Store {
	m := miniredis.RunT(b)
	stores := map[string]store.Store{"miniredis": open(b, miniURL(m), nil)}
	url := os.Getenv("CALF_TEST_REDIS_URL")
	if url == "" {
		url = defaultTestURL
	}
	o, err := goredis.ParseURL(url)
	if err == nil {
		c := goredis.NewClient(o)
		err = c.Ping(b.Context()).Err()
		c.Close()
	}
	if err == nil {
		u, prefix := realRedis(b)
		stores["redis"] = open(b, u, &redis.Options{KeyPrefix: prefix})
	}
	return stores
}

func BenchmarkPut(b *testing.B) {
	for name, s := range benchStores(b) {
		b.Run(name, func(b *testing.B) { storetest.PutBenchmark(b, s) })
	}
}

func BenchmarkGet(b *testing.B) {
	for name, s := range benchStores(b) {
		b.Run(name, func(b *testing.B) { storetest.GetBenchmark(b, s) })
	}
}

func BenchmarkUpdate(b *testing.B) {
	for name, s := range benchStores(b) {
		b.Run(name, func(b *testing.B) { storetest.UpdateBenchmark(b, s) })
	}
}
