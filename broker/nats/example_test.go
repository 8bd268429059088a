package nats_test

import (
	"context"
	"fmt"
	"os"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats"
)

// A broker on an embedded server keeps its messages in a directory.
func ExampleOpenEmbedded() {
	dir, err := os.MkdirTemp("", "calf-nats")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, err := nats.OpenEmbedded(ctx, dir, nil)
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
