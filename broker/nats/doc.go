// Package nats is a [calf.Broker] on NATS JetStream, for Calf programs
// that run as several workers, or that must keep their messages across
// restarts.
//
//	b, err := nats.Open(ctx, "nats://127.0.0.1:4222", nil)
//
// connects to a NATS server with JetStream enabled, and
//
//	b, err := nats.OpenEmbedded(ctx, dir, nil)
//
// starts a single-node server inside the process, storing its messages in
// files under dir, for a durable setup without a separate server. The
// embedded server listens on no network port: only the broker's own
// process reaches it. Close shuts it down; opening the same dir again
// resumes with the messages not yet handled.
//
// The broker works with servers from 2.9 on.
//
// # Subjects and the stream
//
// A message on channel C with key K is published on the subject
//
//	{Prefix}.{P}.{C}
//
// where Prefix is [Options.Prefix] ("calfbus" by default; it can't be
// mistaken for a Calf channel, which starts with "calf.") and P is the
// partition of K: [Partition], the FNV-1a 32-bit hash of K (of the
// message id when the key is empty) modulo [Options.Partitions] (16 by
// default). Channels are NATS subject tokens, so a subscription pattern
// maps to a subject filter as it is.
//
// One stream ([Options.Stream], "CALF" by default) captures Prefix + ".>"
// in file storage; Open creates it, or updates it to the options. Its
// retention is interest-based: a message stays until every consumer
// group whose pattern matches it has acknowledged it (or parked it), and a
// message that no group matches is dropped at once, as with an in-memory
// broker. The message id is the JetStream message id (the Nats-Msg-Id
// header): a message published again with the same id within
// [Options.DuplicateWindow] (2 minutes by default) is dropped as a
// duplicate.
//
// # Wire format
//
// The payload of a message is the [calf.Message] as JSON, with the names
// of its JSON tags: {"id", "channel", "key", "data", "metadata":
// {"correlation_id", "causation_id", "run_id", "session_id", "traceparent",
// "time"}}, with "data" holding the JSON payload (compacted, its characters
// left unescaped) and the attempt left out.
// A producer in another language publishes that JSON to the subject above,
// with the id in the Nats-Msg-Id header. When "channel" is absent the
// subject's channel is used, and when "id" is absent the Nats-Msg-Id
// header is. A payload that does not decode, or whose channel is not its
// subject's, is parked at once as a permanent failure, its bytes in the
// dead letter's RawData (or its Message.Data when they are JSON).
//
// # Consumer groups and ordering
//
// Each consumer group has one pull consumer per partition, filtering
// {Prefix}.{P}.{pattern}, with explicit acks and at most one message
// outstanding (MaxAckPending 1). A partition's messages are therefore
// handled one at a time in publish order, and a message being retried
// holds back the later messages of its partition until it succeeds or is
// parked. This is how the broker keeps per-key order under redelivery,
// which JetStream alone does not: a refused message comes back after later
// ones. The cost is that keys sharing a partition wait for each other;
// partitions are handled in parallel, up to
// [calf.SubscribeOptions.Concurrency] at once per subscription (default
// [Options.Concurrency], the number of partitions). Raise Partitions for
// more parallelism: it bounds how many keys a group handles at once across
// all its workers.
//
// The consumers of a named group are durable and named after the group and
// partition. Every member, in any process, fetches from them, so the group
// spreads across workers, and a group that comes back resumes where it
// left off. A group keeps its pattern: subscribing to it with another one
// fails with [ErrGroupPattern]. A private group (empty Group) has consumers
// of its own that start at the messages published after Subscribe
// returns; they are deleted when the subscription closes, or by the server
// 30 seconds after its process went away.
//
// # Delivery, retries and dead letters
//
// [calf.Metadata.Attempt] is JetStream's delivery count. The handler's
// context carries the message and is cancelled when the subscription
// closes. When a handler returns an error the message is refused with a
// delay from [Options.Backoff] (50 ms doubling to 5 s, with jitter, by
// default), so the server redelivers it after the delay. After the last
// attempt ([calf.SubscribeOptions.MaxAttempts], else [Options.MaxAttempts]),
// or at once for an error marked [calf.Permanent], the message is parked: a
// [calf.NewDeadLetterMessage] is published on [calf.DeadLetterChannel]
// through the broker, and the original is terminated. A message that
// arrives over its attempts without an outcome (its workers crashed) is
// parked without calling the handler. The consumers' MaxDeliver (the
// attempts plus 5) is a safety net should parking keep failing.
//
// While a handler runs, the broker tells the server every quarter of
// [Options.AckWait] (4 seconds by default) that the message is in
// progress, so a handler may run for as long as it needs. When a worker
// dies (kill -9, a lost machine), the server redelivers the message it was
// handling once AckWait has passed since its last heartbeat, to another
// member of the group, and the partition moves on: with the defaults, a
// run continues on another worker within about 4 seconds. Dead letters
// are kept only while some group subscribes to [calf.DeadLetterChannel]:
// run a named group on it to keep them.
//
// # Closing
//
// Closing a subscription stops its fetching, cancels its handlers'
// context and waits for them. A message whose handler returns an error
// because of the close is refused at once, so that another member of the
// group gets it without delay; a handler that returns nil acknowledges its
// message. Older servers may still hand a message to a member that has
// just closed; it is then redelivered after AckWait. Closing the broker
// closes its subscriptions and the connection.
//
// # Backpressure
//
// Publish returns once the server has stored the message. With
// [Options.MaxPending] set, it blocks while the stream holds that many
// messages not yet handled (or parked) by every group they match, until
// handlers make room or the publisher's context ends. The bound covers the
// whole stream, every group and dead letters included, and each process
// applies it to its own publishes: a process counts its publishes since it
// last asked the server, and asks again only when that estimate reaches
// the bound, so publishers in several processes may overshoot it by a few
// messages each. A publish made from a handler never blocks, so that
// chains of handlers publishing to each other cannot deadlock: the bound
// is soft for handler output. Without MaxPending (the default) Publish
// never blocks, and the backlog is bounded only by [Options.MaxAge],
// [Options.MaxBytes] (once reached, Publish fails) and the server's
// storage limits. The work in flight is bounded by MaxAckPending: one
// message per partition and group.
package nats
