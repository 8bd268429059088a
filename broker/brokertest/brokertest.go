package brokertest

import (
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// Timeout bounds every wait of the suite. Only a broker that fails a test
// makes the suite wait this long.
const Timeout = 10 * time.Second

// Features declares what the brokers under test cannot do, and the settings
// of theirs the suite needs to know. The zero value declares a broker that
// does everything and is missing its QueueSize.
type Features struct {
	// QueueSize is the bound the brokers that newBroker returns put on the
	// messages a consumer group holds unhandled: Publish blocks once a
	// group holds that many. The suite publishes a few more than that to
	// one group, so keep it small (16, say). Required unless Unbounded.
	QueueSize int
	// Unbounded declares that the broker cannot bound a group's queue, so
	// that Publish never blocks. The backpressure test is skipped.
	Unbounded bool
	// SerializedKeys declares that the broker may handle messages with
	// different keys one after another (keys that share a partition, for
	// example), so that a slow handler holds up other keys. The tests that
	// keys are handled at the same time (KeysInParallel,
	// SlowKeyHoldsNoOther, CrashWithKeysInFlight) are skipped, and the
	// dead-letter test does not check that other keys progress while a
	// failing key is held. Calf's brokers must not declare it: a model call
	// of one run must not hold up another run.
	SerializedKeys bool
	// KeyOrderPerChannel declares that the broker keeps a key's messages
	// in order only among those of one channel (a topic per channel, say),
	// so that a subscription to several channels may receive the messages
	// of two channels in either order. The pattern test then compares the
	// channels received as a set.
	KeyOrderPerChannel bool

	// Durable, when set, declares a broker that keeps its messages and its
	// groups' positions outside the process (on a server, in files), and
	// runs the tests of durability: Restart, AckLost, Rebalance and
	// ScaleOrder. It prepares a backing of its own for the subtest t (a
	// stream, a topic prefix, a directory) and returns open, which opens a
	// new broker on that backing each time it is called: another process,
	// or the same one started again. Brokers opened on one backing share
	// their groups: a group subscribed in two of them shares its messages,
	// and a group subscribed again after a restart resumes where it left
	// off. The suite closes some of the brokers it opens; open must
	// register their Close with t.Cleanup, and Close must tolerate a
	// second call. The brokers redeliver a failed message after a short
	// backoff, as newBroker's do, and the messages of a crashed broker
	// within a few seconds (its ack wait or session timeout): the suite
	// fails a test after [Timeout] without progress. Nil skips these
	// tests: a broker that lives in one process cannot be restarted.
	Durable func(t *testing.T) (open func() calf.Broker)
	// ReplaysPastInterrupted declares that a group's position may stop at
	// a message whose handling was interrupted (one offset per partition,
	// as Kafka commits), so that the messages of other keys handled after
	// it are delivered again to the group's next member: at-least-once
	// delivery, in order per key. Restart then checks that those come
	// again in order and, to an idempotent handler, with no second effect,
	// instead of checking that no handled message comes again.
	ReplaysPastInterrupted bool
	// SingleInstance declares that only one broker of a Durable backing
	// may be open at a time (an embedded server that holds its directory).
	// The tests with members in two brokers at once (Rebalance,
	// ScaleOrder) are skipped.
	SingleInstance bool
	// Crash, when set, abandons b, a broker from Durable's open, as a
	// killed process would: its connections drop without waiting for its
	// handlers, and what those handlers return never reaches the server. A
	// handler still running may return afterwards; b is closed later by
	// the test's cleanup. The AckLost test needs it, and Rebalance uses it
	// to remove a member (else it closes the member's broker).
	Crash func(b calf.Broker)
}

// Run runs the conformance suite against the brokers newBroker returns, one
// parallel subtest per part of the contract. newBroker is called once per
// subtest and must return a broker of its own, which redelivers a failed
// message after a short backoff (a few milliseconds: the suite waits for
// redeliveries) and whose Close tolerates a second call (the suite closes
// one broker itself). Register the broker's Close with t.Cleanup.
//
// The tests of durability (Restart, AckLost, Rebalance, ScaleOrder) open
// their brokers with [Features.Durable] instead, and are skipped without
// it.
func Run(t *testing.T, newBroker func(t *testing.T) calf.Broker, f Features) {
	tests := []struct {
		name    string
		run     func(*env)
		durable bool // opens its brokers with f.Durable
	}{
		{"RoundTrip", testRoundTrip, false},
		{"Patterns", testPatterns, false},
		{"InvalidPatterns", testInvalidPatterns, false},
		{"InvalidChannels", testInvalidChannels, false},
		{"NoSubscriber", testNoSubscriber, false},
		{"Groups", testGroups, false},
		{"MemberLeaves", testMemberLeaves, false},
		{"KeyOrder", testKeyOrder, false},
		{"KeysInParallel", testKeysInParallel, false},
		{"SlowKeyHoldsNoOther", testSlowKeyHoldsNoOther, false},
		{"KeyOrderUnderFaults", testKeyOrderUnderFaults, false},
		{"PublishFromHandler", testPublishFromHandler, false},
		{"Redelivery", testRedelivery, false},
		{"DeadLetter", testDeadLetter, false},
		{"HandlerPanic", testHandlerPanic, false},
		{"Outage", testOutage, false},
		{"DeadLetterKept", testDeadLetterKept, false},
		{"SubscriptionClose", testSubscriptionClose, false},
		{"BrokerClose", testBrokerClose, false},
		{"Backpressure", testBackpressure, false},
		{"Restart", testRestart, true},
		{"AckLost", testAckLost, true},
		{"Rebalance", testRebalance, true},
		{"ScaleOrder", testScaleOrder, true},
		{"CrashWithKeysInFlight", testCrashWithKeysInFlight, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &env{t: t, f: f, prefix: "bt" + calf.NewID()[:12]}
			if tc.durable {
				if f.Durable == nil {
					t.Skip("Features.Durable is not set: the broker cannot be restarted or opened twice on one backing")
				}
				e.open = f.Durable(t)
				e.b = e.open()
			} else {
				e.b = newBroker(t)
			}
			tc.run(e)
		})
	}
}

// WaitUntil waits until cond holds, checking it every 10 ms, and fails t
// once [Timeout] passes without it, saying what it waited for.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, Timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
