package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/calf-go/calf"
)

// untilAvailable calls fn until it succeeds, fails with an error that is
// not an outage ([calf.IsUnavailable]), or ctx ends, waiting between tries
// from 100 ms growing to 2 s. A caller whose run has ended reads it through
// a store or broker restart and gets its result, not the outage's error.
// When ctx ends first, the last error is returned.
func untilAvailable[T any](ctx context.Context, fn func() (T, error)) (T, error) {
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

// publishInput publishes a run's input through an outage of the broker: a
// retry publishes the same message id, which the broker deduplicates, so
// the input is neither lost nor doubled.
func (rt *Runtime) publishInput(ctx context.Context, msg *calf.Message) error {
	if err := rt.prepareInput(ctx, msg.Channel); err != nil {
		return err
	}
	_, err := untilAvailable(ctx, func() (struct{}, error) { return struct{}{}, rt.client.Publish(ctx, msg) })
	return err
}

// prepareInput prepares the group of the input channel channel on the
// broker (calf.PrepareGroup) the first time this runtime sends an input
// there, through an outage of the broker: on a broker that keeps a message
// only for the groups that exist when it is published, a run sent before
// any worker has served the agent then waits for the first one.
//
// One caller prepares at a time, the others waiting for it: runs started
// together do not each ask the broker.
func (rt *Runtime) prepareInput(ctx context.Context, channel string) error {
	if _, ok := rt.prepared.Load(channel); ok {
		return nil
	}
	select {
	case rt.preparing <- struct{}{}:
		defer func() { <-rt.preparing }()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if _, ok := rt.prepared.Load(channel); ok {
		return nil
	}
	_, err := untilAvailable(ctx, func() (struct{}, error) {
		return struct{}{}, calf.PrepareGroup(ctx, rt.client.Broker(), channel, channel)
	})
	if err != nil {
		return fmt.Errorf("prepare the group of %s: %w", channel, err)
	}
	rt.prepared.Store(channel, true)
	return nil
}

// retryOutage is untilAvailable within the default outage budget: what a
// handler uses to record an outcome that was costly to get (a model's
// answer) through an outage of the store, rather than return and be
// delivered again, which would get it anew.
func retryOutage[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, calf.DefaultOutageBudget)
	defer cancel()
	return untilAvailable(ctx, fn)
}
