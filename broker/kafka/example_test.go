package kafka_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/kafka"
)

// Workers share a consumer group on a Kafka cluster; here, franz-go's
// in-process fake cluster.
func ExampleOpen() {
	cluster, err := kfake.NewCluster()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	ctx := context.Background()
	b, err := kafka.Open(ctx, cluster.ListenAddrs(), &kafka.Options{Partitions: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()

	done := make(chan struct{})
	err = c.Handle(ctx, "users.*.created", func(ctx context.Context, m *calf.Message) error {
		var name string
		if err := m.Decode(&name); err != nil {
			return calf.Permanent(err)
		}
		fmt.Printf("hello, %s (attempt %d)\n", name, m.Metadata.Attempt)
		if name == "grace" {
			close(done)
		}
		return nil
	}, &calf.SubscribeOptions{Group: "greeter"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"ada", "grace"} {
		if _, err := c.Emit(ctx, "users.eu.created", name, calf.WithKey("eu")); err != nil {
			fmt.Println(err)
			return
		}
	}
	<-done
	// Output:
	// hello, ada (attempt 1)
	// hello, grace (attempt 1)
}

// A channel's topic is the channel, after the topic prefix, with the
// characters Kafka does not allow replaced.
func ExampleTopic() {
	for _, ch := range []string{"calf.agent.calculator.input", "orders.eu:west.placed"} {
		t, err := kafka.Topic("prod.", ch)
		fmt.Println(t, err)
	}
	// Output:
	// prod.calf.agent.calculator.input <nil>
	// prod.orders.eu_west.placed <nil>
}

// A URL names the seed brokers and sets options.
func ExampleParseURL() {
	seeds, opts, err := kafka.ParseURL("kafka://k1:9092,k2?partitions=32&topic_prefix=prod.")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(seeds, opts.Partitions, opts.TopicPrefix)
	// Then: b, err := kafka.Open(ctx, seeds, opts)
	// Output:
	// [k1:9092 k2:9092] 32 prod.
}
