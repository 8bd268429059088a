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
// across keys, redelivery, dead letters, closing, and backpressure. It waits
// on what the broker does, never on the clock: its timeouts (10 seconds)
// only expire when a broker fails a test. A capability declared missing in
// Features is skipped with a reason, never silently.
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
// to be idempotent must come out with the same effect.
package brokertest
