// Package calf is the vocabulary of the Calf event runtime: the [Message]
// that travels on a broker, the [Broker] contract every adapter implements,
// and the [Client] that emits events, registers handlers and waits for
// replies.
//
// Everything Calf does is an event on a channel. An agent is a set of
// handlers subscribed to its channels (see package agent); a run is the chain
// of messages that share a correlation id. Because state lives in a store
// (package store) and not in goroutines, a run can survive a crash, move to
// another worker, or wait for a human for days.
//
// # Channels and patterns
//
// A channel is a dot-separated name such as "calf.agent.researcher.input".
// Subscriptions take a pattern in which "*" matches exactly one token and ">"
// matches one or more trailing tokens, as in NATS: "calf.agent.*.output" or
// "calf.agent.researcher.>".
//
// # Delivery
//
// Brokers deliver at least once. A handler that returns nil acknowledges the
// message; one that returns an error has it redelivered after a backoff, up
// to a bounded number of attempts, after which the message is parked on the
// dead-letter channel [DeadLetterChannel]. Wrap an error with [Permanent] to
// park the message at once (a message that can never be handled, such as one
// that does not decode). Messages with the same [Message.Key] are delivered in
// order within a consumer group; messages with different keys are handled in
// parallel.
//
// Handlers must therefore be idempotent. Calf's own handlers are: they derive
// event ids deterministically from the run, the step and the tool call, and
// they record every effect in the store with a versioned compare-and-swap
// before they emit what follows from it.
//
// # Following, inboxes and shutdown
//
// [Client.Request] waits for the reply whose correlation id matches;
// [Client.Inbox] is the channel of this client's replies; [Client.Follow]
// yields the messages of a channel as a [Follower], whose buffer is
// bounded by [Options.FollowBuffer]: past it, Next returns
// [ErrFollowerBehind] after the messages it holds. [Client.Shutdown] stops
// the handlers once those in progress have finished.
//
// # Optional abilities
//
// A broker may do more than the contract asks, each ability an interface
// of its own checked with a type assertion: [ChannelCreator],
// [ChannelDeleter], [GroupInspector] (who serves a group) and
// [GroupPreparer] (a group that keeps messages before its first member).
//
// # Outages
//
// An error of a service that cannot be reached is marked with
// [Unavailable] (it matches [ErrUnavailable] and [IsUnavailable]). Brokers
// retry such a failure for the outage budget ([DefaultOutageBudget])
// without using up an attempt; handlers return these errors as they are,
// never wrapped by [Permanent].
package calf
