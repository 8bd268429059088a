package agent

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
)

// publishInput publishes a run's input through an outage of the broker: a
// retry publishes the same message id, which the broker deduplicates, so
// the input is neither lost nor doubled.
func (rt *Runtime) publishInput(ctx context.Context, msg *calf.Message) error {
	if err := rt.prepareInput(ctx, msg.Channel); err != nil {
		return err
	}
	_, err := engine.UntilAvailable(ctx, func() (struct{}, error) { return struct{}{}, rt.client.Publish(ctx, msg) })
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
	_, err := engine.UntilAvailable(ctx, func() (struct{}, error) {
		return struct{}{}, calf.PrepareGroup(ctx, rt.client.Broker(), channel, channel)
	})
	if err != nil {
		return fmt.Errorf("prepare the group of %s: %w", channel, err)
	}
	rt.prepared.Store(channel, true)
	return nil
}
