// Package kafka is a [calf.Broker] on Apache Kafka (and the clusters that
// speak its protocol), built on franz-go, for Calf programs that run as
// several workers and keep their messages across restarts.
//
//	b, err := kafka.Open(ctx, []string{"127.0.0.1:9092"}, &kafka.Options{Partitions: 32})
//
// connects to a cluster through its bootstrap brokers. [ParseURL] reads
// the brokers and options from a URL such as
// kafka://k1:9092,k2:9092?partitions=32. Every process that shares a
// cluster must use the same [Options.TopicPrefix] and [Options.Partitions].
//
// # Topics and partitions
//
// Each channel has a topic of its own, named by [Topic]: the
// [Options.TopicPrefix] (none by default), then the channel, in which every
// byte of a token outside [a-zA-Z0-9_-] becomes '_' (the dots between
// tokens stay; Kafka allows [a-zA-Z0-9._-] in a topic name). So the channel
// calf.agent.calculator.input is the topic calf.agent.calculator.input, and
// the channels a:b and a_b share the topic a_b; consumers tell them apart
// by the channel each message carries. A channel whose topic would be
// longer than Kafka's 249 characters is refused with an error matching
// [calf.ErrInvalidChannel]. Kafka warns that topics differing only in '.'
// and '_' collide in its metric names, and refuses to create the second of
// two such topics: Publish reports it.
//
// Publish creates a channel's topic on first use, with
// [Options.Partitions] partitions (16 by default) and the replication
// factor of [Options.ReplicationFactor] (the cluster's default unless
// set). The inbox of a [calf.Client] (a channel starting with
// [calf.InboxPrefix]) has one consumer, the client that owns it: its topic
// gets a single partition and a retention of one day. A client deletes its
// inbox topic when it shuts down ([Broker.DeleteChannels]); the inbox
// topics of clients that died stay until deleted: remove the topics
// calf.inbox.* that no running client owns now and then. On a cluster that
// does not let it create topics,
// create them beforehand: the broker uses the topics that exist, whatever
// their partitions.
//
// A pattern subscription finds the topics that exist when it starts at
// once, and topics created later by other processes only at its next
// metadata refresh ([Options.MetadataMaxAge]). [Broker.CreateChannels]
// (see [calf.ChannelCreator]) creates topics ahead of their first publish;
// agent.Serve uses it for its agent's channels, so that a caller in another
// process that follows a run by pattern sees its first events without
// waiting for a refresh.
//
// The record key is the message key, or the message id when the key is
// empty. Kafka's default partitioner (murmur2 of the key, as every Kafka
// client computes it) chooses the partition, so all the messages of a run
// (keyed by run id) on one channel share a partition.
//
// # Wire format
//
// The value of a record is the [calf.Message] as JSON, with the names of
// its JSON tags: {"id", "channel", "key", "data", "metadata":
// {"correlation_id", "causation_id", "run_id", "session_id",
// "traceparent", "time"}}, with "data" holding the JSON payload and the
// attempt left out. A producer in another language writes that JSON to
// the channel's topic with the key as record key. When "channel" is absent
// the topic, without the prefix, is the channel; when "key" is absent the
// record key is, unless it equals the message id (the key of a message
// published without one); bytes of a record key that are not UTF-8 become
// U+FFFD, as they would in the message's JSON. A value that does not
// decode, has no "id" (consumers know a message again by its id), or
// whose channel does not belong on its topic, is parked at once as a
// permanent failure.
//
// # Consumer groups and ordering
//
// A subscription is a member of the Kafka consumer group named by
// [calf.SubscribeOptions.Group]. A subscription with the empty group (a
// private one) joins no Kafka group: it consumes every partition of its
// topics directly, from their end offsets at Subscribe, commits nothing,
// and sees every matching message published after Subscribe returns,
// with no wait for a group to form.
//
// A pattern without wildcards consumes its channel's topic, which
// Subscribe creates. A pattern with wildcards consumes, by a regular
// expression over topic names ("*" is one token, ">" one or more), every
// topic that may carry a matching channel, including the topics created
// after Subscribe: topics this broker creates are found at once, those of
// other processes within [Options.MetadataMaxAge] (3 seconds by default),
// and their messages are consumed from their start.
//
// A named group Kafka has no committed offsets for starts at the end of
// the existing topics of its pattern: Subscribe commits their end offsets
// before joining, so the group gets every message published after
// Subscribe returns, however long joining takes. A group with committed
// offsets resumes from them, in any process. (Kafka has no atomic way to
// create a group at a position: should two processes subscribe a new
// group at the same instant, the messages published in between may be
// skipped. Workers that start together on a fresh cluster are safe once
// one of them has subscribed.)
//
// The group assigns each partition to one member (cooperative sticky
// balancing). The member takes a partition's records in offset order and
// hands each to the lane of its key: a lane handles its records one at a
// time, in order, so the messages of a key on one channel are handled in
// publish order, one at a time, across the whole group; lanes run in
// parallel, so keys that share a partition do not wait for each other (a
// model call of one run holds up no other run). What bounds a member's
// work is [calf.SubscribeOptions.Concurrency] ([Options.Concurrency], 1024
// by default): the messages a subscription handles at once. Partitions
// only spread the work over the members. A member holds at most
// [Options.QueueSize] records of a partition between fetching and
// settling them (and pauses fetching the partition at that bound), so
// memory stays bounded however long a key takes. The messages of one key
// on different channels are in different topics: a subscription to
// several channels keeps each channel's order per key, not the order
// between channels.
//
// # Delivery, retries and dead letters
//
// Kafka keeps one committed offset per partition, so a member commits a
// partition up to its lowest record not yet settled (handled, or
// parked): it marks that position, and commits what it marked every
// [Options.CommitInterval] (100 ms by default), when a partition is taken
// from it, and when it closes. Delivery is therefore at least once: when a
// member crashes, or a partition moves while a record is in progress, the
// next owner handles again, in offset order, every record from that
// position on, including those of other keys already handled after it (at
// most QueueSize of them). Each key's records still come in order, and a
// handler that records what it did (as Calf's agent handlers do) has its
// effect once. For the same reason [Options.MaxPending] counts the records
// after a slow key's as pending until it is settled.
//
// A handler's error is retried in place: the member waits for
// [Options.Backoff] (50 ms doubling to 5 s, with jitter, by default) and
// calls the handler again with the same message, holding back the later
// records of its key and no others. [calf.Metadata.Attempt] counts
// the calls within one member: a message handled again after a rebalance
// or a crash starts again at 1. After the last attempt
// ([calf.SubscribeOptions.MaxAttempts], else [Options.MaxAttempts]), or at
// once for an error marked [calf.Permanent], the message is parked: a
// [calf.NewDeadLetterMessage] is published on [calf.DeadLetterChannel]
// (the topic calf.deadletter), and its offset committed. Should parking
// fail, the member retries it, with the same backoff, holding the
// partition.
//
// An error of a service that cannot be reached ([calf.IsUnavailable]: the
// store down or restarting) uses up no attempt: the handler is called
// again in place, after a backoff from 100 ms to 2 s, for as long as the
// outage budget allows ([calf.SubscribeOptions.OutageBudget], else
// [Options.OutageBudget], else [calf.DefaultOutageBudget]). A dead letter
// is never parked and never dropped: its handler (the recorder of package
// deadletter) is called again until it succeeds, its offset uncommitted
// meanwhile.
//
// Kafka keeps every record published: a message published twice (by a
// producer that retried, or a handler that ran twice and emitted the same
// event) is two records. Within [Options.DuplicateWindow] (2 minutes by
// default) a member drops a record whose message id it handled or parked
// in the same partition, so such a message is handled once; the window is
// the member's memory, and a partition that moves starts with an empty
// one.
//
// # Failover
//
// A member that closes leaves its group at once, and the others take its
// partitions. A member that dies without closing (kill -9, a lost
// machine) holds its partitions until either of two things happens:
//
//   - Its process's liveness beats stop for [Options.FailoverAfter] (2 s
//     by default). Every broker with a consumer group subscription
//     publishes a beat on [MembersTopic] eight times per FailoverAfter,
//     naming its group members; the brokers that share a group with a
//     silent one remove its members from the group (a LeaveGroup request
//     on their behalf), and the group rebalances at once.
//   - The group coordinator misses its heartbeats for
//     [Options.SessionTimeout]. The session timeout defaults to the
//     lowest the cluster accepts, its group.min.session.timeout.ms, but no
//     less than 2 seconds: 6 seconds on a stock Kafka.
//
// The others learn of the new assignment at their next heartbeat
// ([Options.HeartbeatInterval], 500 ms by default) and fetch the
// partitions they got within 250 ms: with the defaults, a dead member's
// partitions move within about 3 seconds. A live process taken for dead
// (paused for FailoverAfter) loses its partitions and gets some back at
// its next heartbeat; the messages it handled but had not committed are
// handled again, as after a crash. On a cluster where the broker may not
// create topics, create the members topic with one partition beforehand,
// or failover waits for the session timeout (the broker logs a warning).
//
// When partitions move, the member that loses one finishes the handler in
// progress (it is not cancelled) and commits before the partition is
// handed over, so one key is never handled by two members at once, unless
// the handler outlasts [Options.RebalanceTimeout] (30 s by default).
//
// # Closing
//
// Closing a subscription stops its fetching, cancels its handlers'
// context, waits for them, commits the offsets handled and leaves the
// group. A message whose handler returns an error because of the close is
// not committed: the next owner of its partition handles it. Closing the
// broker closes its subscriptions and its connections.
//
// # Backpressure
//
// Publish returns once the cluster has acknowledged the record (all
// in-sync replicas). With [Options.MaxPending] set, it blocks while a
// named consumer group of the message's topic is that many messages
// behind, by the offsets it has committed, until the group catches up or
// the publisher's context ends. Each process counts its own publishes per
// topic and asks the cluster for the groups' lag only when its estimate
// reaches the bound, so publishers in several processes may overshoot it
// by a few messages each. A publish made from a handler never blocks, so
// that chains of handlers publishing to each other cannot deadlock: the
// bound is soft for handler output. Without MaxPending (the default),
// Publish blocks only while [Options.MaxBufferedRecords] records of the
// broker wait to be sent, and a group that falls behind makes no one
// wait: Kafka keeps messages by time and size, not by consumption, and
// messages older than a topic's retention are lost to a group that has
// not handled them.
//
// On the consuming side a subscription holds at most [Options.QueueSize]
// fetched records per partition, pausing the partition's fetching while
// it is full, so a slow handler holds back its partition without
// buffering the topic in memory.
package kafka
