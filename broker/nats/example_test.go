package nats_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats"
)

// Workers in several processes join one group on a NATS server.
func ExampleOpen() {
	ctx := context.Background()
	b, err := nats.Open(ctx, "nats://127.0.0.1:4222", &nats.Options{Stream: "CALF", Partitions: 32})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	sub, err := b.Subscribe(ctx, "calf.agent.*.input", func(ctx context.Context, m *calf.Message) error {
		fmt.Println("input", m.ID)
		return nil
	}, &calf.SubscribeOptions{Group: "workers"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
}
