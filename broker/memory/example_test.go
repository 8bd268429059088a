package memory_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
)

func Example() {
	b := memory.New(nil)
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	ctx := context.Background()

	// Greet every new user, in order per user.
	err := c.Handle(ctx, "users.*.created", func(ctx context.Context, m *calf.Message) error {
		var name string
		if err := m.Decode(&name); err != nil {
			return calf.Permanent(err)
		}
		fmt.Printf("hello, %s (attempt %d)\n", name, m.Metadata.Attempt)
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
	// Wait for the handlers to finish.
	if err := b.Drain(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%+v\n", b.Stats())
	// Output:
	// hello, ada (attempt 1)
	// hello, grace (attempt 1)
	// {Published:2 Delivered:2 Redelivered:0 DeadLettered:0 Discarded:0 OutageRetries:0}
}
