// Package delivery is the delivery core of the broker adapters: what every
// broker does with a message once it has fetched it, written once.
//
//   - [Lanes]: a lane per key over a partition's messages, each handling
//     its key's messages one at a time and in order, lanes in parallel, so
//     that a slow key holds up no other key ([Queue] is a lane's queue).
//   - [Runner]: a subscription's handler called with panics turned into
//     errors ([Runner.Call]); retries in place after a backoff until the
//     handler succeeds or the message is parked ([Runner.Deliver]);
//     parking on the dead-letter channel, retried while it fails
//     ([Runner.Park], [Runner.ParkRetried]).
//   - [Policy]: what decides a message's fate after its handler fails.
//
// What stays with each broker is its own: how it fetches, acknowledges or
// commits, tells the server that a message is in progress, and hands
// messages back when it loses a partition. The memory broker runs its
// queues on a pool of reused workers of its own and retries on a timer
// rather than in place, but calls, decides and parks through a [Runner].
//
// The rules of [Policy], in order:
//
//   - A dead letter (a message on [calf.DeadLetterChannel]) is never
//     parked and never dropped: it is retried until its handler (the
//     dead-letter recorder) succeeds, after a backoff that grows to
//     [MaxDeadLetterBackoff]. Its failures are logged at most once every
//     [DeadLetterLogInterval] per subscription, with the count of those
//     not logged: while the recorder's store is down every dead letter
//     fails, again and again.
//   - An error marked [calf.Permanent] parks the message at once.
//   - An error of a service that cannot be reached ([calf.IsUnavailable])
//     is retried after a backoff that grows to [MaxOutageBackoff], without
//     using up an attempt, for as long as the outage budget allows,
//     counted from the first such failure in a row; past the budget it
//     counts as an ordinary failure.
//   - Any other error uses up an attempt; after the last one the message is
//     parked.
package delivery
