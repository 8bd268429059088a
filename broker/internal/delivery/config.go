package delivery

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/lograte"
)

// Defaults are a broker's settings of its subscriptions' delivery, the
// defaults of what a subscription's options leave unset.
type Defaults struct {
	// Broker names the broker in errors and logs.
	Broker string
	// Log receives the delivery's warnings and errors.
	Log *slog.Logger
	// MaxAttempts, Concurrency and OutageBudget are the defaults of the
	// fields of [calf.SubscribeOptions] of the same names.
	MaxAttempts  int
	Concurrency  int
	OutageBudget time.Duration
	// Backoff returns the delay after the failed attempt number attempt,
	// and between tries to park.
	Backoff func(attempt int) time.Duration
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Resolve returns opts (nil: none set) with the fields it leaves unset
// taken from d.
func (d *Defaults) Resolve(opts *calf.SubscribeOptions) calf.SubscribeOptions {
	var o calf.SubscribeOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = d.Concurrency
	}
	o.OutageBudget = cmp.Or(o.OutageBudget, d.OutageBudget)
	return o
}

// Runner returns the runner of a subscription with the resolved options
// o, handler h and handlers' context ctx, which publishes its dead letters
// with publish. Its calls at once are not bounded: a broker that retries
// in place sets [Runner.Slots].
func (d *Defaults) Runner(ctx context.Context, o calf.SubscribeOptions, h calf.Handler, publish func(dl *calf.Message) error) Runner {
	return Runner{
		Broker:  d.Broker,
		Group:   o.Group,
		Log:     d.Log,
		Handler: h,
		Context: ctx,
		Policy: Policy{
			MaxAttempts:  o.MaxAttempts,
			Backoff:      d.Backoff,
			OutageBudget: o.OutageBudget,
			Now:          d.Now,
		},
		Publish:     publish,
		ParkBackoff: d.Backoff,
		deadWarn:    lograte.New(DeadLetterLogInterval),
	}
}
