package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// killConnections terminates every backend of the application name from a
// connection of its own, waits until those backends have exited, and
// returns how many it terminated.
func killConnections(t *testing.T, app string) int {
	t.Helper()
	conn := admin(t)
	rows, err := conn.Query(t.Context(),
		`WITH ours AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = $1)
		SELECT pid FROM ours WHERE pg_terminate_backend(pid)`, app)
	if err != nil {
		t.Fatalf("terminate: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatalf("terminate: %v", err)
	}
	testwait.ForErr(t, 10*time.Second, "the backends of "+app+" to end", func() error {
		var left int
		if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if left > 0 {
			return fmt.Errorf("%d outlived pg_terminate_backend", left)
		}
		return nil
	})
	return len(pids)
}

// TestReconnect has the server terminate every connection of a Store, then
// checks that the Store carries on: whichever operation comes first, at
// most that one fails, with an error that says the connection was lost,
// and every later operation succeeds on new connections.
func TestReconnect(t *testing.T) {
	tests := []struct {
		name string
		// first runs the first operation after the connections died.
		first func(ctx context.Context, s store.Store, kind string, version int64) error
		// mayFail is whether first may fail: a write whose fate is
		// unknown is not repeated.
		mayFail bool
	}{
		{"get", func(ctx context.Context, s store.Store, kind string, _ int64) error {
			_, err := s.Get(ctx, kind, "r")
			return err
		}, false},
		{"list", func(ctx context.Context, s store.Store, kind string, _ int64) error {
			_, err := s.List(ctx, kind, "", "", 0)
			return err
		}, false},
		{"delete", func(ctx context.Context, s store.Store, kind string, _ int64) error {
			return s.Delete(ctx, kind, "other", 0)
		}, false},
		{"put", func(ctx context.Context, s store.Store, kind string, _ int64) error {
			_, err := s.Put(ctx, kind, "new", []byte("x"), 0)
			return err
		}, true},
	}
	schema := newSchema(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fmt.Sprintf("calf-test-%016x", rand.Uint64())
			var logs syncBuffer
			s := open(t, &postgres.Options{
				Schema: schema, ApplicationName: app, MaxConns: 4,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			ctx := t.Context()
			kind := "reconnect-" + app
			v, err := s.Put(ctx, kind, "r", []byte("0"), 0)
			if err != nil {
				t.Fatal(err)
			}
			// Open every connection the Store may use.
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for range 10 {
						if _, err := s.Get(ctx, kind, "r"); err != nil {
							t.Errorf("goroutine %d: Get: %v", g, err)
							return
						}
					}
				})
			}
			wg.Wait()

			if n := killConnections(t, app); n == 0 {
				t.Fatalf("the Store had no connection with application_name %s", app)
			}
			err = tt.first(ctx, s, kind, v)
			switch {
			case err == nil:
			case !tt.mayFail:
				t.Fatalf("first operation after the connections died: %v", err)
			case errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "terminating connection"):
				t.Fatalf("first operation after the connections died = %v, want the server's reason", err)
			case !errors.Is(err, calf.ErrUnavailable):
				t.Fatalf("first operation after the connections died = %v, which does not match calf.ErrUnavailable: a broker would park its message instead of retrying it", err)
			}
			if tt.mayFail && err == nil {
				// A write that succeeded was not repeated.
				if rec, err := s.Get(ctx, kind, "new"); err != nil || rec.Version != 1 {
					t.Errorf("after the first Put: Get = %+v, %v; want version 1", rec, err)
				}
			}

			// Everything after it works, on new connections.
			for i := range 20 {
				if v, err = s.Put(ctx, kind, "r", []byte(strconv.Itoa(i+1)), v); err != nil {
					t.Fatalf("Put %d after reconnecting: %v", i, err)
				}
			}
			rec, err := s.Get(ctx, kind, "r")
			if err != nil || string(rec.Data) != "20" || rec.Version != 21 {
				t.Fatalf("Get after reconnecting = %+v, %v; want version 21 holding 20", rec, err)
			}
			if _, err := s.List(ctx, kind, "", "", 0); err != nil {
				t.Fatalf("List after reconnecting: %v", err)
			}
			if !tt.mayFail && !strings.Contains(logs.String(), "connection lost") {
				t.Errorf("the retry was not logged:\n%s", logs.String())
			}
		})
	}
}

// TestReconnectUnderLoad terminates a Store's connections while
// goroutines update counters through it: only operations in flight may
// fail, each with an error, and no increment is lost or applied twice.
func TestReconnectUnderLoad(t *testing.T) {
	app := fmt.Sprintf("calf-test-%016x", rand.Uint64())
	s := open(t, &postgres.Options{Schema: newSchema(t), ApplicationName: app, MaxConns: 4})
	ctx := t.Context()
	const goroutines, perGoroutine = 4, 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures int
		kills    = make(chan struct{})
	)
	for g := range goroutines {
		wg.Go(func() {
			id := "c" + strconv.Itoa(g)
			var v int64
			killed := false
			for i := 0; i < perGoroutine; {
				// Once: a Put that fails after the kill is written again
				// at the same i.
				if i == perGoroutine/2 && g == 0 && !killed {
					close(kills)
					killed = true
				}
				next, err := s.Put(ctx, "load", id, []byte(strconv.Itoa(i+1)), v)
				if err != nil {
					if errors.Is(err, store.ErrConflict) {
						// The write landed but its reply was lost.
						rec, gerr := s.Get(ctx, "load", id)
						if gerr != nil || rec.Version != v+1 || string(rec.Data) != strconv.Itoa(i+1) {
							t.Errorf("%s: conflict at version %d, then Get = %+v, %v", id, v, rec, gerr)
							return
						}
						next = rec.Version
					} else {
						mu.Lock()
						failures++
						mu.Unlock()
						// Find out whether it landed, as a redelivered
						// message's handler would.
						rec, gerr := s.Get(ctx, "load", id)
						if v == 0 && errors.Is(gerr, store.ErrNotFound) {
							continue // the first write, not written: write again
						}
						if gerr != nil {
							t.Errorf("%s: Get after a failed Put: %v", id, gerr)
							return
						}
						if rec.Version == v {
							continue // not written: write again
						}
						next = rec.Version
					}
				}
				v = next
				i++
			}
		})
	}
	<-kills
	killConnections(t, app)
	wg.Wait()
	if failures > goroutines {
		t.Errorf("%d Puts failed, want at most the %d in flight", failures, goroutines)
	}
	for g := range goroutines {
		id := "c" + strconv.Itoa(g)
		rec, err := s.Get(ctx, "load", id)
		if err != nil || rec.Version != perGoroutine || string(rec.Data) != strconv.Itoa(perGoroutine) {
			t.Errorf("%s = %+v, %v; want version %d", id, rec, err, perGoroutine)
		}
	}
}
