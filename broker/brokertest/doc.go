// Package brokertest is the conformance suite for [calf.Broker] adapters,
// and a set of fault-injecting broker wrappers for the tests of any package
// built on a broker.
//
// Every adapter's tests call [Run] with a function that returns a fresh
// broker, and declare in [Features] what the adapter cannot do:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, func(t *testing.T) calf.Broker {
//			b := memory.New(&memory.Options{
//				QueueSize: 16,
//				Backoff:   func(int) time.Duration { return time.Millisecond },
//			})
//			t.Cleanup(func() { b.Close() })
//			return b
//		}, brokertest.Features{QueueSize: 16})
//	}
//
// The suite checks the contract only: payload and metadata round trips,
// channel patterns, consumer groups, per-key ordering with parallelism
// across keys, redelivery, dead letters, closing, backpressure, and, for
// durable brokers, restarts, lost acknowledgements and rebalancing. It waits
// on what the broker does, never on the clock: its timeouts (10 seconds)
// only expire when a broker fails a test. A capability declared missing in
// Features is skipped with a reason, never silently.
//
// # Durability
//
// A broker that keeps its messages outside the process declares
// [Features.Durable]: a function that prepares a backing (a stream, a
// topic prefix, a directory) and returns another that opens a new broker
// on it, standing for another worker process or the same one started
// again. With it the suite checks what a distributed deployment relies
// on, with handlers that record the ids they handled, as idempotent
// handlers do, and so count each message's effect once:
//
//   - Restart: a group's broker is closed while a handler is interrupted,
//     more messages are published while no member runs, and a new broker
//     resumes the group: every message is handled, in order per key, the
//     interrupted one included, and none handled before the close is
//     delivered again.
//   - AckLost: a handler succeeds but its broker crashes
//     ([Features.Crash]) before the acknowledgement reaches the server:
//     the message is delivered again to another member, before the later
//     messages of its key, and has its effect once.
//   - Rebalance: a member joins a group mid-stream and another leaves it
//     (crashes, when the suite can crash a broker): no message is lost,
//     none has two effects, and each key keeps its order.
//   - ScaleOrder: 8 keys × 500 messages while the group scales from one
//     member to two and back: per-key order without gaps, and never two
//     messages of a key handled at once.
//
// [Features.SingleInstance] skips the tests that need two brokers open on
// one backing at once. The in-memory broker declares none of this.
//
// # Shared backends
//
// Each subtest asks for a broker of its own, and every channel and group
// name it uses carries a prefix unique to that run of the subtest, so
// newBroker may hand out brokers that share a server. Dead letters are
// told apart by the channel of the message they carry.
//
// # Fault injection
//
// [DuplicatePublishes] and [DuplicateDeliveries] wrap a broker so that
// every message is published, or handled, several times: handlers written
// to be idempotent must come out with the same effect. [Handled] wraps a
// broker so that a test learns when each delivery's handler returned, to
// deliver a message again at a chosen moment and know it was handled.
package brokertest
