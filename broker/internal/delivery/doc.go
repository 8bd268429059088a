// Package delivery holds what decides a message's fate after its handler
// fails, shared by the broker adapters: retry it after a backoff, retry it
// through an outage without counting the attempt, or park it on the
// dead-letter channel.
//
// The rules, in order:
//
//   - A dead letter (a message on [calf.DeadLetterChannel]) is never
//     parked and never dropped: it is retried until its handler (the
//     dead-letter recorder) succeeds, after a backoff that grows to
//     [MaxDeadLetterBackoff].
//   - An error marked [calf.Permanent] parks the message at once.
//   - An error of a service that cannot be reached ([calf.IsUnavailable])
//     is retried after a backoff that grows to [MaxOutageBackoff], without
//     using up an attempt, for as long as the outage budget allows,
//     counted from the first such failure in a row; past the budget it
//     counts as an ordinary failure.
//   - Any other error uses up an attempt; after the last one the message is
//     parked.
package delivery
