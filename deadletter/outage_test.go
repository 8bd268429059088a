package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	storememory "github.com/calf-go/calf/store/memory"
)

// downStore is a store that can be taken down: while it is, every call
// fails as a refused connection does, and is counted.
type downStore struct {
	store.Store
	down     atomic.Bool
	attempts atomic.Int64 // calls while down
}

func (s *downStore) fail() error {
	if !s.down.Load() {
		return nil
	}
	s.attempts.Add(1)
	return fmt.Errorf("dial tcp 127.0.0.1:5432: %w", syscall.ECONNREFUSED)
}

func (s *downStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.fail(); err != nil {
		return store.Record{}, err
	}
	return s.Store.Get(ctx, kind, id)
}

func (s *downStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if err := s.fail(); err != nil {
		return 0, err
	}
	return s.Store.Put(ctx, kind, id, data, version)
}

func (s *downStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, kind, prefix, after, limit)
}

// lineCounter is a slog handler that counts the lines at each level.
type lineCounter struct {
	mu     sync.Mutex
	counts map[slog.Level]int
}

func (h *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Level]++
	return nil
}
func (h *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineCounter) WithGroup(string) slog.Handler      { return h }

func (h *lineCounter) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[l]
}

// A store down for four minutes with a thousand dead letters waiting on
// it: the recorder probes it one call at a time on a backoff that all of
// them share, so the store sees a few calls an outage whatever the number
// of dead letters, and the log a few lines; once the store is back every
// dead letter is recorded.
func TestStoreOutageProbedNotStormed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			letters = 1000
			outage  = 4 * time.Minute
		)
		lines := &lineCounter{counts: map[slog.Level]int{}}
		log := slog.New(lines)
		b := memory.New(&memory.Options{Logger: log})
		defer b.Close()
		client := calf.NewClient(b, &calf.Options{Logger: log})
		defer client.Close()
		s := &downStore{Store: storememory.New()}
		if err := deadletter.Serve(t.Context(), client, s); err != nil {
			t.Fatal(err)
		}
		park := func(i int) {
			orig := &calf.Message{ID: fmt.Sprintf("m%04d", i), Channel: "calf.test.work", Key: fmt.Sprintf("run-%04d", i),
				Data: []byte(`{}`), Metadata: calf.Metadata{CorrelationID: fmt.Sprintf("run-%04d", i)}}
			if err := b.Publish(t.Context(), calf.NewDeadLetterMessage(orig, "workers", errors.New("boom"), 5, time.Now())); err != nil {
				t.Fatal(err)
			}
		}

		s.down.Store(true)
		start := time.Now()
		// The first dead letter finds the store down; the others arrive
		// while it is.
		park(0)
		synctest.Wait()
		for i := 1; i < letters; i++ {
			park(i)
		}
		time.Sleep(outage - time.Since(start))
		synctest.Wait()
		attempts := s.attempts.Load()
		s.down.Store(false)

		// One probe at a time, each after a delay from the upper half of
		// a backoff from MinProbeBackoff doubling to MaxProbeBackoff: at
		// most outage/(MaxProbeBackoff/2) probes at the cap, plus those of
		// the ramp (fewer than 7), plus the first failure.
		limit := int64(outage/(deadletter.MaxProbeBackoff/2)) + 8
		if attempts > limit {
			t.Errorf("the store saw %d calls during the outage with %d dead letters waiting; want at most %d", attempts, letters, limit)
		}
		if attempts < 10 {
			t.Errorf("the store saw %d calls during the outage: it was not probed", attempts)
		}

		// Everything is recorded once the store is back: after the next
		// probe and each dead letter's next delivery.
		testwait.ForErr(t, time.Minute, "every dead letter recorded after the store came back", func() error {
			recs, err := deadletter.List(t.Context(), s)
			if err == nil && len(recs) != letters {
				err = fmt.Errorf("%d recorded, want %d", len(recs), letters)
			}
			return err
		})
		if recs, err := deadletter.OfRun(t.Context(), s, "run-0999"); err != nil || len(recs) != 1 {
			t.Errorf("OfRun(run-0999) = %d records, %v; want 1", len(recs), err)
		}

		// A few lines for the whole outage: the recorder's first warning,
		// one every LogInterval, and one when the store is back; the
		// broker's warnings of failed dead letters, one every
		// DeadLetterLogInterval.
		warns, infos := lines.count(slog.LevelWarn), lines.count(slog.LevelInfo)
		t.Logf("%d dead letters, a %s outage: %d calls to the store, %d WARN lines, %d INFO lines", letters, outage, attempts, warns, infos)
		if maxWarns := 2 * int(outage/deadletter.LogInterval+2); warns > maxWarns {
			t.Errorf("%d WARN lines for the outage, want at most %d", warns, maxWarns)
		}
		if infos != 1 {
			t.Errorf("%d INFO lines, want 1 (the store is back)", infos)
		}
		if errs := lines.count(slog.LevelError); errs != 0 {
			t.Errorf("%d ERROR lines", errs)
		}
	})
}
