package brokertest

import (
	"context"

	"github.com/calf-go/calf"
)

// DuplicatePublishes returns a broker that publishes every message n times
// on b, one copy after another with the same id, so that the duplicates
// reach handlers through b's normal ordering. Subscribe and Close go to b.
// An n below 1 counts as 1. The returned broker's Unwrap method returns b,
// for reaching methods of b beyond [calf.Broker].
func DuplicatePublishes(b calf.Broker, n int) calf.Broker {
	return &duplicatePublishes{Broker: b, n: max(n, 1)}
}

type duplicatePublishes struct {
	calf.Broker
	n int
}

// Publish publishes msg n times, stopping at the first error.
func (d *duplicatePublishes) Publish(ctx context.Context, msg *calf.Message) error {
	for range d.n {
		if err := d.Broker.Publish(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// Unwrap returns the wrapped broker.
func (d *duplicatePublishes) Unwrap() calf.Broker { return d.Broker }

// DuplicateDeliveries returns a broker whose subscriptions invoke their
// handler n times in a row for every delivery, with the same message and
// context. The delivery fails with the first error the calls return, and
// is then redelivered by b as usual; the calls after a failure still
// happen. Publish and Close go to b. An n below 1 counts as 1. The returned
// broker's Unwrap method returns b.
func DuplicateDeliveries(b calf.Broker, n int) calf.Broker {
	return &duplicateDeliveries{Broker: b, n: max(n, 1)}
}

type duplicateDeliveries struct {
	calf.Broker
	n int
}

// Subscribe subscribes a handler that calls h n times per delivery.
func (d *duplicateDeliveries) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if h == nil {
		return d.Broker.Subscribe(ctx, pattern, nil, opts)
	}
	n := d.n
	return d.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		var first error
		for range n {
			if err := h(ctx, msg); err != nil && first == nil {
				first = err
			}
		}
		return first
	}, opts)
}

// Unwrap returns the wrapped broker.
func (d *duplicateDeliveries) Unwrap() calf.Broker { return d.Broker }

// Handled returns a broker whose subscriptions call done with each
// delivery's message and the error its handler returned, once the handler
// has returned: for tests that must know when a message was handled,
// whatever the handler did with it. Publish and Close go to b. The
// returned broker's Unwrap method returns b.
func Handled(b calf.Broker, done func(msg *calf.Message, err error)) calf.Broker {
	return &handled{Broker: b, done: done}
}

type handled struct {
	calf.Broker
	done func(*calf.Message, error)
}

// Subscribe subscribes a handler that calls h, then done.
func (d *handled) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if h == nil {
		return d.Broker.Subscribe(ctx, pattern, nil, opts)
	}
	return d.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		err := h(ctx, msg)
		d.done(msg, err)
		return err
	}, opts)
}

// Unwrap returns the wrapped broker.
func (d *handled) Unwrap() calf.Broker { return d.Broker }
