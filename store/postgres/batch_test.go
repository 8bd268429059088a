package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/storetest"
)

// Operations that arrive while the Store's sender is busy go out together,
// and each gets its own outcome: no update is lost, every conflict is
// reported, every read sees a committed version.
func TestBatchedOperations(t *testing.T) {
	s := open(t, &postgres.Options{Schema: newSchema(t), MaxConns: 4}) // one sender
	storetest.Counters(t, s, 40, 25)
	batches, ops := postgres.BatchStats(s)
	if batches == 0 || ops < 2*batches {
		t.Errorf("%d batches of %d operations: the operations did not go out together", batches, ops)
	}
	t.Logf("%d batches, %.1f operations each", batches, float64(ops)/float64(max(batches, 1)))
}

// Deletes that arrive while the Store's sender is busy go out together
// too, each with its own outcome: a delete at the stored version removes
// the record, one at another version is a conflict and removes nothing,
// one of a missing record succeeds.
func TestBatchedDeletes(t *testing.T) {
	schema := newSchema(t)
	s := open(t, &postgres.Options{Schema: schema, MaxConns: 4}) // one sender
	ctx := t.Context()
	const n = 60
	for i := range n {
		if _, err := s.Put(ctx, "del", fmt.Sprintf("r%02d", i), []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the sender with a write waiting for a lock, so that the
	// deletes queue behind it.
	if _, err := s.Put(ctx, "del", "busy", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	release := lockRows(t, schema, "del", "busy")
	held := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "del", "busy", []byte("y"), 1)
		held <- err
	}()
	waitLockWaits(t, schema, 1)
	before, _ := postgres.BatchStats(s)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	var started atomic.Int64
	for i := range n {
		version := int64(1)
		if i%3 == 0 {
			version = 2 // stored: 1
		}
		wg.Go(func() {
			started.Add(1)
			errs[i] = s.Delete(ctx, "del", fmt.Sprintf("r%02d", i), version)
		})
	}
	wg.Go(func() {
		started.Add(1)
		errs[n] = s.Delete(ctx, "del", "missing", 1)
	})
	testwait.For(t, 10*time.Second, "every delete to start", func() bool { return started.Load() == n+1 })
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if after, _ := postgres.BatchStats(s); after == before {
		t.Error("the deletes did not go out together")
	}
	for i := range n {
		_, gerr := s.Get(ctx, "del", fmt.Sprintf("r%02d", i))
		if i%3 == 0 {
			if !errors.Is(errs[i], store.ErrConflict) || gerr != nil {
				t.Errorf("r%02d at a wrong version: delete %v, then get %v; want a conflict, the record kept", i, errs[i], gerr)
			}
		} else if errs[i] != nil || !errors.Is(gerr, store.ErrNotFound) {
			t.Errorf("r%02d: delete %v, then get %v; want it removed", i, errs[i], gerr)
		}
	}
	if errs[n] != nil {
		t.Errorf("delete of a missing record: %v", errs[n])
	}
}

// lockRows locks the records of kind with ids in another session until the
// test ends or release is called.
func lockRows(t *testing.T, schema, kind string, ids ...string) (release func()) {
	t.Helper()
	tx, err := admin(t).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := tx.Exec(t.Context(), `UPDATE `+schema+`.calf_records SET data = data WHERE kind = $1 AND id = $2`, []byte(kind), []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	return release
}

// waitLockWaits waits until n statements on the tables of schema wait
// for a lock.
func waitLockWaits(t *testing.T, schema string, n int) {
	t.Helper()
	conn := admin(t)
	testwait.ForErr(t, 10*time.Second, fmt.Sprintf("%d statements waiting for a lock", n), func() error {
		var got int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, schema).Scan(&got); err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// A batch whose write waits too long for a row lock fails as a whole, and
// its operations run again alone: the others succeed, and the blocked one
// reports the lock timeout.
func TestBatchWithALockedRecord(t *testing.T) {
	schema := newSchema(t)
	s, err := postgres.Open(t.Context(), withParam(testURL(t), "lock_timeout", "300ms"), &postgres.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for _, id := range []string{"busy", "locked"} {
		if _, err := s.Put(ctx, "k", id, []byte("0"), 0); err != nil {
			t.Fatal(err)
		}
	}
	lockRows(t, schema, "k", "busy", "locked")

	// The write of "busy" holds the one sender while the others queue,
	// and go out together once it times out.
	busy := make(chan error, 1)
	go func() { _, err := s.Put(ctx, "k", "busy", []byte("1"), 1); busy <- err }()
	waitLockWaits(t, schema, 1)
	const others = 10
	errs := make([]error, others)
	var lockedErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, lockedErr = s.Put(ctx, "k", "locked", []byte("1"), 1) })
	for i := range others {
		wg.Go(func() { _, errs[i] = s.Put(ctx, "k", fmt.Sprintf("free-%d", i), []byte("1"), 0) })
	}
	wg.Wait()
	isLockTimeout := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "55P03"
	}
	if err := <-busy; !isLockTimeout(err) {
		t.Errorf("Put of the locked record busy = %v, want a lock timeout", err)
	}
	if !isLockTimeout(lockedErr) {
		t.Errorf("Put of the locked record locked = %v, want a lock timeout", lockedErr)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("Put free-%d, batched with a locked record: %v", i, err)
		}
		if rec, err := s.Get(ctx, "k", fmt.Sprintf("free-%d", i)); err != nil || string(rec.Data) != "1" {
			t.Errorf("free-%d = %+v, %v", i, rec, err)
		}
	}
	if batches, _ := postgres.BatchStats(s); batches == 0 {
		t.Error("no batch was sent: the test did not test a failed batch")
	}
	for _, id := range []string{"busy", "locked"} {
		if rec, err := s.Get(ctx, "k", id); err != nil || rec.Version != 1 {
			t.Errorf("%s after its write timed out = %+v, %v; want version 1", id, rec, err)
		}
	}
}

// An operation whose context ends while it waits for the sender returns
// at once, and is never sent.
func TestQueuedOperationCancelled(t *testing.T) {
	schema := newSchema(t)
	s := open(t, &postgres.Options{Schema: schema, MaxConns: 4})
	ctx := t.Context()
	if _, err := s.Put(ctx, "k", "busy", []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	release := lockRows(t, schema, "k", "busy")
	busy := make(chan error, 1)
	go func() { _, err := s.Put(ctx, "k", "busy", []byte("1"), 1); busy <- err }()
	waitLockWaits(t, schema, 1)

	qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Put(qctx, "k", "queued", []byte("1"), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued Put = %v, want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("queued Put returned after %s", d)
	}
	release()
	if err := <-busy; err != nil {
		t.Fatalf("Put busy after the lock went: %v", err)
	}
	if _, err := s.Get(ctx, "k", "queued"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the cancelled Put was written: Get = %v", err)
	}
}
