// Package deadletter keeps the messages brokers park on
// [calf.DeadLetterChannel] in a state store, where an operator can list
// them, read them and replay them.
//
// A broker parks a message after its handler failed the last allowed
// attempt (or marked the error [calf.Permanent]), publishing a
// [calf.DeadLetter] on the dead-letter channel. [Serve] subscribes a
// recorder to that channel, in the consumer group [RecorderGroup], which
// writes each dead letter once to the store under [store.KindDeadLetter],
// keyed by the dead-letter message's id. Every worker may run the
// recorder: the group gives each dead letter to one of them, and a dead
// letter delivered twice is recorded once.
//
// # While the store is down
//
// A dead letter is never parked nor dropped: the broker delivers it again
// until it is recorded. So that a store outage does not turn the dead
// letters waiting on it into a storm of connections and of log lines, the
// recorder ([Recorder], which [Serve] subscribes) keeps what it knows of
// its store: once a call finds the store unavailable
// ([calf.IsUnavailable]), only one dead letter at a time goes to the store,
// as a probe, after a backoff with jitter from [MinProbeBackoff] to
// [MaxProbeBackoff] that all the dead letters waiting share. Those that
// arrive while a probe is in flight wait for its result; those that arrive
// before the next probe is due are turned away at once, with an error
// matching [ErrStoreUnavailable] and [calf.ErrUnavailable], and delivered
// again by the broker. The recorder warns when the store becomes
// unavailable, then at most once every [LogInterval] with the counts of
// failed calls and of dead letters turned away, and logs at level INFO
// when the store is back; the brokers limit their own warnings of failed
// dead letters in the same way.
//
// The recorder also indexes each record under the correlation id of the
// parked message ([store.KindDeadLetterRun]): [OfRun] finds the dead
// letters, not yet replayed, of a run and of the runs it started, so that
// a caller that begins to wait on a run after one of its messages was
// parked (workflow.Wait) learns of it at once.
//
// [List] and [Get] read the records; [Replay] republishes the original
// message on its channel, with a new id derived from the old one, and
// marks the record replayed. Replaying a record again does nothing, so an
// operator (or a script) may retry a replay whose outcome it did not see.
// A replayed message goes to every consumer group subscribed to its
// channel, not only the one that failed: Calf's agent handlers are
// idempotent, so a group that had handled it handles it again without
// effect. A replayed message that fails again is parked again, as a new
// dead letter.
//
// The calf command exposes this as calf deadletters list, show and replay.
package deadletter
