// Package memory is Calf's default broker: an in-process implementation of
// [calf.Broker] for a single program, its tests, and the embedded mode of the
// calf command.
//
//	b := memory.New(nil)
//	defer b.Close()
//	c := calf.NewClient(b, nil)
//
// # Consumer groups
//
// Subscriptions that share a non-empty [calf.SubscribeOptions.Group] are the
// members of one consumer group: each message is handled by one member.
// Every group gets its own copy of a message, so a handler may keep the
// *Message it is given; the Data of the copies is shared and must not be
// modified. A subscription with an empty Group has a private group of its
// own and sees every matching message. All the members of a group subscribe
// to the same pattern: subscribing to an existing group with another pattern
// fails with [ErrGroupPattern].
//
// # Ordering and concurrency
//
// Within a group, the messages of one [calf.Message.Key] are handled one at
// a time in publish order, by one member at a time: a key is pinned to a
// member while it has messages queued. Different keys are handled in
// parallel, up to [calf.SubscribeOptions.Concurrency] keys at once per
// member (default [Options.Concurrency]), and messages with an empty key may
// be handled in parallel with anything. A goroutine runs for each key that
// has messages queued and exits when the key's queue empties: idle keys cost
// nothing.
//
// The handler's context carries the message ([calf.MessageFromContext]) and
// is cancelled when the subscription closes. [calf.Metadata.Attempt] is the
// delivery attempt, 1 for the first.
//
// # Failures
//
// When a handler returns an error, its message is redelivered after
// [Options.Backoff] (exponential from 50 ms to 5 s, with jitter, by
// default). Meanwhile the later messages of its key wait, and the other
// keys go on; the waiting message holds no goroutine. After the last
// attempt ([calf.SubscribeOptions.MaxAttempts], else [Options.MaxAttempts]),
// or at once when the error is marked [calf.Permanent], the message is
// parked: a [calf.DeadLetter] is published on [calf.DeadLetterChannel], a
// warning is logged, and the key moves on. The dead letters of a private
// group name no group. A handler that panics fails with an error.
//
// An error of a service that cannot be reached ([calf.IsUnavailable]: the
// store or a broker down or restarting) uses up no attempt: the message is
// retried in place, after a backoff from 100 ms to 2 s, for as long as the
// outage budget allows ([calf.SubscribeOptions.OutageBudget], else
// [Options.OutageBudget], else [calf.DefaultOutageBudget]); only then do
// its failures count. A message on the dead-letter channel is never parked
// and never dropped: when its handler (the dead-letter recorder) fails, it
// is logged and retried, after a backoff that grows to 5 s, until it
// succeeds.
//
// # Backpressure
//
// [Broker.Publish] blocks while a matching group holds [Options.QueueSize]
// messages not yet acknowledged, or all the groups together hold
// [Options.HeldSize] (by default QueueSize), until a handler makes room or
// the publisher's context ends. A publish made from within a handler of the
// same broker (with the handler's context or one derived from it) never
// blocks, so that chains of handlers that publish to each other cannot
// deadlock; the bounds are therefore soft for handler output, and
// publishers racing for the last free place may overshoot them by one
// message each. The bound on all groups is what keeps a burst of publishes
// (a million runs submitted at once) from piling up in the later steps of
// a chain: each step's output counts against it, so a publish from outside
// waits until the chain has made room. It also means that a group whose
// handlers stall (a store that cannot be reached, a subscriber that stopped
// reading) holds back publishes to every channel once the broker is full.
//
// # Durability
//
// Nothing is durable. Messages live in memory until they are handled: when
// the last member of a group closes its subscription, or the broker closes,
// the group's unhandled messages are discarded (and counted in
// [Stats.Discarded]). A group created later with the same name starts empty.
// When a member leaves a group that has other members, its queued keys move
// to them, and a message interrupted by the close is delivered again.
//
// [Broker.Drain] waits until every message has been handled, including the
// messages that handlers publish meanwhile: tests use it to let a chain of
// handlers settle, and a single process to shut down gracefully.
package memory
