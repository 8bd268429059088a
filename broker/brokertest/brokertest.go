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
	// example). The test that two keys are handled at the same time is
	// skipped, and the dead-letter test does not check that other keys
	// progress while a failing key is held.
	SerializedKeys bool
}

// Run runs the conformance suite against the brokers newBroker returns, one
// parallel subtest per part of the contract. newBroker is called once per
// subtest and must return a broker of its own, which redelivers a failed
// message after a short backoff (a few milliseconds: the suite waits for
// redeliveries) and whose Close tolerates a second call (the suite closes
// one broker itself). Register the broker's Close with t.Cleanup.
func Run(t *testing.T, newBroker func(t *testing.T) calf.Broker, f Features) {
	tests := []struct {
		name string
		run  func(*env)
	}{
		{"RoundTrip", testRoundTrip},
		{"Patterns", testPatterns},
		{"InvalidPatterns", testInvalidPatterns},
		{"InvalidChannels", testInvalidChannels},
		{"NoSubscriber", testNoSubscriber},
		{"Groups", testGroups},
		{"MemberLeaves", testMemberLeaves},
		{"KeyOrder", testKeyOrder},
		{"KeysInParallel", testKeysInParallel},
		{"PublishFromHandler", testPublishFromHandler},
		{"Redelivery", testRedelivery},
		{"DeadLetter", testDeadLetter},
		{"SubscriptionClose", testSubscriptionClose},
		{"BrokerClose", testBrokerClose},
		{"Backpressure", testBackpressure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t)
			tc.run(&env{t: t, b: b, f: f, prefix: "bt" + calf.NewID()[:12]})
		})
	}
}
