package delivery

import (
	"time"

	"github.com/calf-go/calf"
)

// Backoff caps of the retries that do not use up attempts.
const (
	// MinOutageBackoff is the delay before the first retry through an
	// outage.
	MinOutageBackoff = 100 * time.Millisecond
	// MaxOutageBackoff caps the delay between retries through an outage,
	// and so how late a message is handled after the outage ends.
	MaxOutageBackoff = 2 * time.Second
	// MaxDeadLetterBackoff caps the delay between retries of a dead letter
	// whose recording fails.
	MaxDeadLetterBackoff = 5 * time.Second
)

// Policy is how a subscription retries and parks.
type Policy struct {
	// MaxAttempts bounds the failed deliveries, outages aside, before a
	// message is parked.
	MaxAttempts int
	// Backoff returns the delay after the failed attempt number attempt.
	Backoff func(attempt int) time.Duration
	// OutageBudget bounds how long a message is retried through an
	// outage before its failures count as attempts; zero means
	// [calf.DefaultOutageBudget], a negative value no budget (outage
	// errors count as attempts at once).
	OutageBudget time.Duration
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Verdict is what follows a failed delivery.
type Verdict struct {
	// Park reports that the message must be parked now.
	Park bool
	// Wait is the delay before the next attempt, when not parked.
	Wait time.Duration
	// Outage reports that the failure was an outage within the budget:
	// the attempt was not used up.
	Outage bool
}

// Tracker follows one message's failures in a row. Its zero value is a
// message delivered for the first time; a message redelivered by the
// server starts from the delivery count the server gives.
type Tracker struct {
	// Attempt is the number of the attempt being made, from 1. Outage
	// retries do not advance it.
	Attempt int
	// outageSince is when the current run of outage failures began.
	outageSince time.Time
	outageTries int
	deadTries   int
}

// NewTracker returns the tracker of a message on its delivery number
// delivered (from 1).
func NewTracker(delivered int) *Tracker {
	return &Tracker{Attempt: max(delivered, 1)}
}

// After decides what follows the failure err of the current attempt on
// msg, and advances t for the next attempt when there is one.
func (p *Policy) After(t *Tracker, msg *calf.Message, err error) Verdict {
	clock := time.Now
	if p.Now != nil {
		clock = p.Now
	}
	t.Attempt = max(t.Attempt, 1)
	if !Parkable(msg) {
		t.deadTries++
		return Verdict{Wait: calf.ExponentialBackoff(MinOutageBackoff, MaxDeadLetterBackoff)(t.deadTries)}
	}
	if calf.IsPermanent(err) {
		return Verdict{Park: true}
	}
	if calf.IsUnavailable(err) {
		budget := p.OutageBudget
		if budget == 0 {
			budget = calf.DefaultOutageBudget
		}
		now := clock()
		if t.outageSince.IsZero() {
			t.outageSince = now
		}
		if budget > 0 && now.Sub(t.outageSince) < budget {
			t.outageTries++
			return Verdict{Outage: true, Wait: calf.ExponentialBackoff(MinOutageBackoff, MaxOutageBackoff)(t.outageTries)}
		}
	} else {
		t.outageSince, t.outageTries = time.Time{}, 0
	}
	if t.Attempt >= p.MaxAttempts {
		return Verdict{Park: true}
	}
	wait := p.Backoff(t.Attempt)
	t.Attempt++
	return Verdict{Wait: wait}
}

// Parkable reports whether msg may be parked at all: dead letters are
// not.
func Parkable(msg *calf.Message) bool {
	return msg == nil || msg.Channel != calf.DeadLetterChannel
}
