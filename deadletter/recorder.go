package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/lograte"
	"github.com/calf-go/calf/store"
)

// ErrStoreUnavailable is returned (wrapped, and marked with
// [calf.Unavailable]) by a [Recorder] for a dead letter it did not try to
// record because its store was found unavailable and the next probe is
// not due yet. The broker keeps the dead letter and delivers it again.
var ErrStoreUnavailable = errors.New("deadletter: the store is unavailable; waiting for the next probe")

// Backoff of the probes of a store that is down.
const (
	// MinProbeBackoff is the delay, before jitter, from the failure that
	// found the store unavailable to the first probe.
	MinProbeBackoff = 100 * time.Millisecond
	// MaxProbeBackoff caps the delay between probes, and so how late
	// recording resumes after the store is back.
	MaxProbeBackoff = 5 * time.Second
)

// LogInterval is how often, at most, a [Recorder] warns that its store is
// still unavailable.
const LogInterval = 30 * time.Second

// RecorderOptions configures a [Recorder]. The zero value is the default.
type RecorderOptions struct {
	// Logger receives a warning when the store becomes unavailable, then
	// at most one every [LogInterval] while it stays so, with the counts
	// of failed probes and of dead letters turned away, and a line at
	// level INFO when the store is back. Default: discard ([Serve]: the
	// client's logger).
	Logger *slog.Logger
	// Backoff returns the delay before the next probe after try probes
	// failed in a row (from 1). Default: exponential from
	// [MinProbeBackoff] to [MaxProbeBackoff], with jitter
	// ([calf.ExponentialBackoff]).
	Backoff func(try int) time.Duration
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Recorder records dead letters in a store ([Recorder.Handle]). While the
// store cannot be reached ([calf.IsUnavailable]), it probes it with one
// dead letter at a time, after a backoff that grows with each failed
// probe and that every dead letter waiting on the store shares: a dead
// letter that arrives while a probe is in flight waits for its result,
// one that arrives before the next probe is due is turned away at once
// with an error matching [ErrStoreUnavailable] and [calf.ErrUnavailable],
// without a call to the store, and the broker delivers it again later
// (a dead letter is never parked nor dropped). The store therefore sees a
// few calls an outage, whatever the number of dead letters waiting, and
// the log a few lines.
//
// A Recorder is safe for concurrent use; share one per store in a
// process, since its knowledge of the store's outage is its own.
type Recorder struct {
	s       store.Store
	log     *slog.Logger
	backoff func(int) time.Duration
	now     func() time.Time
	warn    *lograte.Limiter

	mu        sync.Mutex
	down      bool          // the store was found unavailable
	since     time.Time     // when it was
	lastErr   error         // the last outage error
	probes    int           // failed probes in a row
	next      time.Time     // when the next probe may start
	probing   chan struct{} // closed when the probe in flight ends; nil when none
	failed    int64         // calls of this outage that failed on the store
	turned    int64         // dead letters of this outage turned away untried
	announced bool          // this outage's warning was written
}

// NewRecorder returns a recorder of dead letters in s; opts may be nil.
func NewRecorder(s store.Store, opts *RecorderOptions) *Recorder {
	var o RecorderOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backoff == nil {
		o.Backoff = calf.ExponentialBackoff(MinProbeBackoff, MaxProbeBackoff)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Recorder{s: s, log: o.Logger, backoff: o.Backoff, now: o.Now, warn: lograte.New(LogInterval)}
}

// Handler returns the handler that records each dead letter it receives in
// s: [NewRecorder](s, nil).Handle.
func Handler(s store.Store) calf.Handler {
	return NewRecorder(s, nil).Handle
}

// Handle records the dead letter msg, as a handler of
// [calf.DeadLetterChannel]. A dead letter already recorded is left as it
// is, so that a redelivery does not undo a replay mark. A payload that is
// not a [calf.DeadLetter] is recorded too, with its bytes in RawData, so
// that nothing parked is invisible. While the store is unavailable, Handle
// probes it one call at a time, as described on [Recorder].
func (r *Recorder) Handle(ctx context.Context, msg *calf.Message) error {
	probe, err := r.enter(ctx)
	if err != nil {
		return err
	}
	err = record(ctx, r.s, msg)
	r.leave(probe, err, ctx.Err() != nil)
	return err
}

// enter lets a call through to the store, and reports whether it is the
// probe of a store found unavailable; or returns the error of a call
// turned away.
func (r *Recorder) enter(ctx context.Context) (probe bool, err error) {
	r.mu.Lock()
	for r.down && r.probing != nil {
		// Wait for the probe in flight.
		ch := r.probing
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	if !r.down {
		return false, nil
	}
	if now := r.now(); now.Before(r.next) {
		r.turned++
		return false, calf.Unavailable(fmt.Errorf("%w (for %s, next probe in %s): %w",
			ErrStoreUnavailable, now.Sub(r.since).Round(time.Millisecond), r.next.Sub(now).Round(time.Millisecond), r.lastErr))
	}
	r.probing = make(chan struct{})
	return true, nil
}

// leave records the outcome err of a call that enter let through; a call
// cut short by its context tells nothing of the store.
func (r *Recorder) leave(probe bool, err error, cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if probe {
		close(r.probing)
		r.probing = nil
	}
	if err != nil && cut {
		return
	}
	now := r.now()
	if !calf.IsUnavailable(err) {
		// The store answered (an error of any other kind is not an outage).
		if r.down {
			r.down = false
			if r.announced {
				r.log.Info("deadletter: the store is available again; recording dead letters",
					"unavailable_for", now.Sub(r.since).Round(time.Millisecond), "failed_calls", r.failed, "turned_away", r.turned)
			}
		}
		return
	}
	r.lastErr = err
	r.failed++
	switch {
	case !r.down:
		r.down, r.since, r.probes, r.failed, r.turned, r.announced = true, now, 1, 1, 0, false
		r.next = now.Add(r.backoff(r.probes))
		r.warn.Do(func(skipped int64) {
			r.announced = true
			r.log.Warn("deadletter: the store is unavailable; recording dead letters one probe at a time",
				"error", err, "next_probe_in", r.next.Sub(now), "lines_skipped", skipped)
		})
	case probe:
		r.probes++
		r.next = now.Add(r.backoff(r.probes))
		r.warn.Do(func(skipped int64) {
			r.announced = true
			r.log.Warn("deadletter: the store is still unavailable",
				"error", err, "unavailable_for", now.Sub(r.since).Round(time.Millisecond),
				"failed_calls", r.failed, "turned_away", r.turned, "next_probe_in", r.next.Sub(now), "lines_skipped", skipped)
		})
	}
	// Otherwise a call that was already under way when the store went
	// down: counted, the probes' backoff unchanged.
}
