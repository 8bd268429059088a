package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/lograte"
)

// Runner is what a subscription of any broker needs to deliver its
// messages: its handler and the handlers' context, the retry policy, and
// how to park. A broker keeps one per subscription.
type Runner struct {
	// Broker names the broker in errors and logs ("memory", "nats",
	// "kafka").
	Broker string
	// Group is the subscription's consumer group, empty for a private one.
	Group string
	// Log receives the warnings of retried dead letters and of parked
	// messages, and the errors of messages that could not be parked.
	Log *slog.Logger
	// Handler is the subscription's handler.
	Handler calf.Handler
	// Context is the handlers' context; [calf.ContextWithMessage] adds the
	// message to it for each call.
	Context context.Context
	// Policy decides what follows a failure.
	Policy Policy
	// Slots, when not nil, bounds the handler calls at once: a call takes
	// a place in it and gives it back when the handler returns. Only
	// [Runner.Deliver] uses it.
	Slots chan struct{}
	// Publish publishes a dead letter, with a context of the broker's
	// choosing (bounded in time, marked as the broker's own).
	Publish func(dl *calf.Message) error
	// ParkBackoff returns the delay before the next try to park a message
	// after try tries failed (from 1). Only [Runner.ParkRetried] uses it.
	ParkBackoff func(try int) time.Duration

	// deadWarn limits the warnings of dead letters whose handler failed
	// to one every [DeadLetterLogInterval]; nil (a Runner not made by
	// [Defaults.Runner]) warns every time.
	deadWarn *lograte.Limiter
}

// DeadLetterLogInterval is how often, at most, a subscription warns that
// a dead letter's handler failed: while the dead-letter recorder's store
// is down every dead letter fails, again and again.
const DeadLetterLogInterval = 30 * time.Second

// Call calls the handler with msg, turning a panic into an error.
func (r *Runner) Call(msg *calf.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: handler panicked on %s: %v\n%s", r.Broker, msg.Channel, p, debug.Stack())
		}
	}()
	return r.Handler(calf.ContextWithMessage(r.Context, msg), msg)
}

// Failed decides what follows the failure err of the current attempt on
// msg, tracked by t (see [Policy.After]), and warns when a dead letter's
// handler failed, since it is kept and retried: at most once every
// [DeadLetterLogInterval], with the number of failures not logged since.
func (r *Runner) Failed(t *Tracker, msg *calf.Message, err error) Verdict {
	v := r.Policy.After(t, msg, err)
	if !v.Park && !Parkable(msg) {
		warn := func(skipped int64) {
			r.Log.Warn(r.Broker+": a dead letter's handler failed; it is kept and retried", "group", r.Group, "id", msg.ID, "key", msg.Key, "error", err, "retry_in", v.Wait, "failures_not_logged", skipped)
		}
		if r.deadWarn == nil {
			warn(0)
		} else {
			r.deadWarn.Do(warn)
		}
	}
	return v
}

// Park publishes the dead letter of msg, which failed its last attempt
// (number attempts) with err, and reports whether msg is settled: its dead
// letter published, or msg itself a dead letter, which is dropped with an
// error logged (parking it would park its dead letter in turn, forever).
// It reports false when the publish failed, the error logged.
func (r *Runner) Park(msg *calf.Message, err error, attempts int) bool {
	orig := msg.Clone()
	orig.Metadata.Attempt = 0
	log := r.Log.With("group", r.Group, "channel", orig.Channel, "id", orig.ID, "key", orig.Key, "attempts", attempts, "error", err)
	if !Parkable(orig) {
		log.Error(r.Broker+": dropped a dead letter that its handler failed to handle", "data", string(orig.Data))
		return true
	}
	now := time.Now
	if r.Policy.Now != nil {
		now = r.Policy.Now
	}
	dl := calf.NewDeadLetterMessage(orig, r.Group, err, attempts, now())
	if perr := r.Publish(dl); perr != nil {
		log.Error(r.Broker+": could not park message on the dead-letter channel", "publish_error", perr, "data", string(orig.Data))
		return false
	}
	log.Warn(r.Broker + ": parked message on the dead-letter channel")
	return true
}

// Stop tells a delivery when to stop handling a message, leaving it
// unsettled.
type Stop struct {
	// C is closed when handling must stop: it ends the waits for a slot,
	// before a retry and between tries to park.
	C <-chan struct{}
	// Halted reports, after a handler failed, that the failure came from
	// the stopping: the message is left unsettled, using up no attempt.
	Halted func() bool
	// GiveUp reports, after a try to park failed and its wait ended,
	// that parking must stop. Nil means Halted.
	GiveUp func() bool
}

// ParkRetried parks msg as [Runner.Park] does, and should that fail,
// tries again after [Runner.ParkBackoff], holding its key's later messages
// back, until it succeeds or parking must stop (stop.GiveUp after a
// wait). It reports whether msg was settled.
func (r *Runner) ParkRetried(msg *calf.Message, err error, attempts int, stop Stop) bool {
	giveUp := stop.GiveUp
	if giveUp == nil {
		giveUp = stop.Halted
	}
	for try := 1; ; try++ {
		if r.Park(msg, err, attempts) {
			return true
		}
		sleep(r.ParkBackoff(try), stop.C)
		if giveUp() {
			return false
		}
	}
}

// Outcome is how [Runner.Deliver] ended.
type Outcome int

// The outcomes of a delivery.
const (
	// Handled: the handler succeeded.
	Handled Outcome = iota
	// Parked: the message failed its last attempt and was parked (or,
	// being a dead letter, dropped).
	Parked
	// Interrupted: handling stopped first; the message is not settled,
	// and the broker hands it back or leaves it for the next owner.
	Interrupted
)

// Deliver calls the handler with msg until it succeeds or msg is parked,
// retrying in place after each verdict's wait: the later messages of its
// key wait meanwhile, in their lane. t holds the failures so far (from
// [NewTracker] with the delivery number the server gives). Each call gets
// a copy of msg carrying its attempt number. stop tells when to stop.
func (r *Runner) Deliver(msg *calf.Message, t *Tracker, stop Stop) Outcome {
	for {
		if r.Slots != nil {
			select {
			case r.Slots <- struct{}{}:
			case <-stop.C:
				return Interrupted
			}
		}
		m := msg.Clone()
		m.Metadata.Attempt = t.Attempt
		attempt := t.Attempt
		err := r.Call(m)
		if r.Slots != nil {
			<-r.Slots
		}
		if err == nil {
			return Handled
		}
		if stop.Halted() {
			return Interrupted
		}
		v := r.Failed(t, msg, err)
		if v.Park {
			if r.ParkRetried(msg, err, attempt, stop) {
				return Parked
			}
			return Interrupted
		}
		if !sleep(v.Wait, stop.C) {
			return Interrupted
		}
	}
}

// sleep waits for d; it reports false when stop is closed first.
func sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
