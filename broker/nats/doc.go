// Package nats is a [calf.Broker] on NATS JetStream, for Calf programs
// that run as several workers, or that must keep their messages across
// restarts.
//
//	b, err := nats.Open(ctx, "nats://127.0.0.1:4222", nil)
//
// connects to a NATS server with JetStream enabled, and [OpenConn] takes
// a connection of the caller's. The package does not contain the server:
// [github.com/calf-go/calf/broker/nats/embedded] starts a single-node
// server inside the process, storing its messages in files under a
// directory, for a durable setup without a separate server.
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
// creation is safe for processes starting together on a cluster: the
// stream, the bucket of leases and a group's consumers are looked up
// first, created only when missing, updated only when their configuration
// differs, and waited for until they have a leader, each request bounded
// by 2 s and made again until the caller's context ends (30 s when it
// has no deadline), since a cluster may leave a request about a stream
// or consumer that another process is creating unanswered. Its
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
// "time", "producer"}}, with "data" holding the JSON payload (compacted, its characters
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
// Each named consumer group has one pull consumer per partition, filtering
// {Prefix}.{P}.{pattern}, with explicit acks and at most [Options.Window]
// messages outstanding (MaxAckPending, 128 by default). A private group
// (a subscription without a group: a caller's inbox) has one consumer
// over every partition, {Prefix}.*.{pattern}, with Partitions × Window
// outstanding, which is quicker to create: the server takes about 5 ms
// for each consumer it keeps on file. Inside a
// partition the member keeps a lane per key: a key's messages are handled
// one at a time, in publish order, while the messages of other keys are
// handled at the same time, so a slow handler (a model call) holds up
// only the later messages of its own key (its run), never another key of
// its partition. [calf.SubscribeOptions.Concurrency] (default
// [Options.Concurrency], 1024) bounds the handlers one subscription runs at
// once, and a subscription holds at most Partitions × Window messages in
// memory: once a partition's window is full the server sends it no more
// until some are settled, which is the backpressure.
//
// Order under redelivery is kept by retrying in place: a message whose
// handler fails is called again after [Options.Backoff] by the same lane,
// which holds back its key's later messages (and only those), and tells
// the server meanwhile that the message is in progress. JetStream alone
// would not keep the order: a refused message comes back after later
// ones.
//
// # Ownership of partitions
//
// Lanes keep a key's order only while one member consumes a partition,
// so each partition of a named group is consumed by one member at a time.
// The members share the partitions through leases in a key-value bucket
// ({Stream}_leases, created on the first named Subscribe), which works on
// servers from 2.9 on (pinned clients of consumer priority groups need
// 2.11). A member announces itself with a key renewed every sixth of the
// lease time and expiring after it (AckWait, at least 2 s); a member
// that has missed three renewals counts as gone. Every member lists the
// live members, sorted, and takes its share of the P partitions: P/n,
// one more for the first P mod n members. It keeps the partitions it
// holds up to its share and claims free ones until it has its share, by
// creating a partition's lease key only if it is absent, and renews its
// leases by compare-and-set on their revision; a partition moves only when
// its holder is gone or holds more than its share, so that a member
// joining or dying moves the fewest partitions. A partition over the
// member's share is given up:
// the member stops fetching, lets the handlers in progress finish, hands
// its other messages back (Nak), in order per key, and only then deletes
// its lease, so that the next owner starts after it. It stops fetching
// before it hands anything back, a partition it was still starting to
// consume included, and hands each message back once: one that reaches it
// again is left to come back after the ack wait. A member that stops
// renewing (a crash, a lost connection) loses its leases when they
// expire; one that finds its lease taken stops the partition at once.
// A member claims its share of the partitions as soon as it has joined,
// so that a worker that has just started serves the runs sent to it at
// once; members started together may each claim more than their share at
// first, and hand the extra partitions over at the next renewals.
//
// A new owner cannot rely on the order in which the server redelivers
// the previous owner's messages: refused ones come back in the order they
// were refused, and those of a crashed owner when their ack wait expires,
// which may be earlier for a later message. So when a member takes a
// partition over, it reads how many messages the consumer has
// outstanding and the last stream sequence delivered; it holds every
// delivery back until each of those outstanding messages has come back,
// then dispatches them all in stream order, before any newer one. With
// the defaults a crashed member's partitions move to the others, and its
// messages flow again, within about 3 seconds (the lease, which lasts as
// long as the ack wait, 2 s, and a renewal interval).
//
// Failure cases: a delivery counts as an attempt even when it was handed
// back unhandled at a hand-over, so a message that changes hands many
// times (members restarted over and over) may reach its last attempt
// sooner. Should an outstanding message not come back within twice the
// ack wait and a second (acknowledged late by a member that lost its
// lease while cut off from the server), the new owner stops waiting, and
// that member's late handlers may have run after the new owner's: per-key
// order then holds only as well as at-least-once delivery allows
// (duplicates, in order of first handling). An acknowledgement lost on
// the way makes the message come back after later ones of its key: a
// duplicate, which handlers are idempotent for.
//
// The consumers of a named group are durable and named after the group and
// partition ([ConsumerName]), so a group that comes back resumes where it
// left off. A
// group keeps its pattern: subscribing to it with another one fails with
// [ErrGroupPattern]. A private group (empty Group) has one member and
// consumers of its own, which it consumes without leases, that start at
// the messages published after Subscribe returns; they are deleted when
// the subscription closes, or by the server 30 seconds after its process
// went away.
//
// # Delivery, retries and dead letters
//
// [calf.Metadata.Attempt] is JetStream's delivery count plus the retries
// in place. The handler's context carries the message and is cancelled
// when the subscription closes. When a handler returns an error it is
// called again after a delay from [Options.Backoff] (50 ms doubling to
// 5 s, with jitter, by default). After the last attempt
// ([calf.SubscribeOptions.MaxAttempts], else [Options.MaxAttempts]), or at
// once for an error marked [calf.Permanent], the message is parked: a
// [calf.NewDeadLetterMessage] is published on [calf.DeadLetterChannel]
// through the broker, and the original is terminated; should parking
// fail, it is tried again, the key's later messages waiting. A message
// that arrives over its attempts without an outcome (its workers crashed)
// is parked without calling the handler. The consumers' MaxDeliver (the
// attempts plus 5) is a safety net.
//
// An error of a service that cannot be reached ([calf.IsUnavailable]: the
// store down or restarting, this broker's server unreachable) uses up no
// attempt: the handler is called again in place, after a backoff from
// 100 ms to 2 s, for as long as the outage budget allows
// ([calf.SubscribeOptions.OutageBudget], else [Options.OutageBudget],
// else [calf.DefaultOutageBudget]). A dead letter is never parked and never
// dropped: its handler (the recorder of package deadletter) is called again
// until it succeeds, the consumers of a subscription to
// [calf.DeadLetterChannel] having no MaxDeliver, so that a parked message
// stays in the stream until it is recorded.
//
// While a member holds a message (in progress or waiting in its lane),
// the broker tells the server every quarter of [Options.AckWait] (2
// seconds by default) that it is in progress, so a handler may run for
// as long as it needs. When a worker dies (kill -9, a lost machine), its
// messages come back once AckWait has passed since their last heartbeat,
// to the member that takes their partition over.
// Dead letters are kept only while some group subscribes to
// [calf.DeadLetterChannel]: run a named group on it to keep them.
//
// # Deleting channels
//
// A channel is a set of subjects of the stream, not a resource of its
// own: [Broker.DeleteChannels] ([calf.ChannelDeleter]) purges the stream
// of the messages on {Prefix}.*.{C}, in every partition, one purge
// request per channel. A subject token is never split, so purging a.b
// leaves the messages of a.b.c, a.bc and x.a.b. A [calf.Client] deletes
// its inbox this way when it shuts down, and a conversation host the
// channels of a conversation it stops, so that the messages a group has
// not yet handled do not stay in the stream. Messages a member holds
// when their channel is purged are handled and acknowledged as usual; one
// handed back afterwards is not delivered again, though a 2.9 server
// counts it outstanding for a while, so that a member taking its
// partition over then waits for it until its takeover gate gives up.
// The stream and the consumers stay, and messages published on the
// channel afterwards are kept as any others.
//
// # Closing
//
// Closing a subscription stops its fetching, cancels its handlers'
// context and waits for them. A message whose handler returns an error
// because of the close, and the messages waiting behind it, are handed
// back at once, in order, and the member's leases are deleted, so that
// other members take its partitions over without waiting for the leases
// to expire; a handler that returns nil acknowledges its message. Closing
// the broker closes its subscriptions and the connection.
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
// storage limits. The messages a subscription holds are bounded by
// Partitions × Window, and the handlers it runs at once by its
// Concurrency.
package nats
