package engine

import (
	"context"
	"time"

	"github.com/calf-go/calf"
)

// UntilAvailable calls fn until it succeeds, fails with an error that is
// not an outage ([calf.IsUnavailable]), or ctx ends, waiting between tries
// from 100 ms growing to 2 s. A caller whose run has ended reads it through
// a store or broker restart and gets its result, not the outage's error.
// When ctx ends first, the last error is returned.
func UntilAvailable[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	backoff := calf.ExponentialBackoff(100*time.Millisecond, 2*time.Second)
	for try := 1; ; try++ {
		v, err := fn()
		if err == nil || !calf.IsUnavailable(err) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(backoff(try))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		}
	}
}

// RetryOutage is UntilAvailable within the default outage budget: what a
// handler uses to record an outcome that was costly to get (a model's
// answer) through an outage of the store, rather than return and be
// delivered again, which would get it anew.
func RetryOutage[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, calf.DefaultOutageBudget)
	defer cancel()
	return UntilAvailable(ctx, fn)
}
