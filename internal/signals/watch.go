package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/calf-go/calf/store"
)

// wokenPage is how many entries of the woken index a read takes at a
// time.
const wokenPage = 256

// Watch reads the index of signals sent by other processes ([KindWoken])
// every every, and emits their wakes with env's client ([ReadWoken]),
// until ctx ends. A process whose broker reaches no other process, and
// which serves runs that wait, runs it: a person who answers from
// another process (calf runs signal, calf approvals approve, against the
// SQLite file of a calf worker) can only record the signal in the store.
// Nothing is kept per waiting run: a million runs waiting cost the watch
// its read of an index that is empty while nobody signals.
func Watch(ctx context.Context, env Env, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := ReadWoken(ctx, env); err != nil && ctx.Err() == nil && log != nil {
			log.Warn("calf: read the signals sent by other processes", "err", err)
		}
	}
}

// ReadWoken emits, with env's client, the wake of each signal in the
// woken index whose run still waits for it, and removes the entries. A
// wake emitted twice (by its sender and here) is harmless: the waiting
// code, run again, finds its wait answered.
func ReadWoken(ctx context.Context, env Env) error {
	if env.Client == nil {
		return errors.New("signals: read the woken index: no client")
	}
	for {
		recs, err := env.Store.List(ctx, KindWoken, "", "", wokenPage)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if err := rewake(ctx, env, rec.ID); err != nil {
				return err
			}
			if err := env.Store.Delete(ctx, KindWoken, rec.ID, rec.Version); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if len(recs) < wokenPage {
			return nil
		}
	}
}

// rewake emits the wake of the signal id, if its run still waits for
// signals of its name.
func rewake(ctx context.Context, env Env, id string) error {
	seqAt := strings.LastIndexByte(id, '/')
	nameAt := strings.LastIndexByte(id[:max(seqAt, 0)], '/')
	if seqAt < 0 || nameAt < 0 {
		return nil // not a signal's id: nothing to wake
	}
	waiter := id[:seqAt] // "{run key}/{name}"
	rec, err := env.Store.Get(ctx, KindWaiter, waiter)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the wait is over
	}
	if err != nil {
		return err
	}
	var w Wake
	if err := json.Unmarshal(rec.Data, &w); err != nil {
		return fmt.Errorf("signals: waiter %s: %w", rec.ID, err)
	}
	sig, err := Get(ctx, env.Store, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil // swept with its run
	}
	if err != nil {
		return err
	}
	return wake(ctx, env.Client, w, sig)
}
