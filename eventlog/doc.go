// Package eventlog keeps the events of runs, so that they can be shown
// after the fact, streamed again from any point, and followed live.
//
// A [Log]'s recorder ([Log.Record]) is a consumer group on the broker,
// like any handler: it adds each message of the agents', teams' and
// workflows' channels to the log of its correlation id ([LogOf]: an agent
// run's id, carried on by the subagent, handoff and member runs it
// starts), and each message of a conversation's channels
// ([ConversationPattern]) to the log named after the conversation's id,
// numbered from 1 in the order the log received them, once each
// however often the broker delivers them ([Log.Append] skips a message id
// it has, and takes the next number with a create-only write, so that
// recorders in many processes share the work). Each event is a record of
// kind [KindEvent] in the state store.
//
// [Log.Read] returns a log's events after a sequence number; [Log.Follow]
// yields them and then each new one as it is added, woken by the
// recorder's notices on [NoticeChannel], so a client that lost its
// connection resumes after the last event it saw ([Event.ID]) and gets
// every later event once, in order, whichever process logged it.
// [Ended] tells the event that ends a run's events.
package eventlog
