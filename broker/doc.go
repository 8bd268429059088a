// Package broker is the home of Calf's broker adapters. It holds no code:
// the contract they implement, [github.com/calf-go/calf.Broker], lives in
// the root package, so that every package can speak of messages without
// importing an adapter.
//
// A broker carries messages from publishers to handlers. Handlers
// subscribe to a channel pattern within a consumer group: the members of a
// group share its messages, and every group gets its own copy. Within a
// group, messages with the same key are handled one at a time in publish
// order, and messages with different keys in parallel. Delivery is at least
// once: a handler that fails has its message redelivered after a backoff,
// holding back the later messages of its key, and after the last attempt
// the message is parked on the dead-letter channel,
// [github.com/calf-go/calf.DeadLetterChannel].
//
// # Adapters
//
//   - [github.com/calf-go/calf/broker/memory]: the in-process default, with
//     consumer groups, per-key ordering, redelivery with backoff, dead
//     letters and backpressure. It keeps nothing across a restart.
//   - [github.com/calf-go/calf/broker/nats]: NATS JetStream, on an external
//     server (nats://) or a connection of the caller's: durable consumers
//     per partition, each owned by one member at a time through leases.
//   - [github.com/calf-go/calf/broker/nats/embedded]: a NATS server with
//     JetStream inside the process, storing in a directory
//     (nats+embedded://).
//   - [github.com/calf-go/calf/broker/kafka]: Kafka, on franz-go: a topic
//     per channel, the partition key the run id, a dead-letter topic.
//
// Package [github.com/calf-go/calf/adapters] opens any of them by URL.
//
// Every adapter passes the conformance suite in
// [github.com/calf-go/calf/broker/brokertest], which also provides
// fault-injecting wrappers (duplicate publishes, duplicate deliveries) for
// the tests of any package built on a broker.
package broker
