package embedded_test

import (
	"context"
	"fmt"
	"os"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats/embedded"
)

// A broker on an embedded server keeps its messages in a directory.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "calf-nats")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, err := embedded.Open(ctx, dir, nil)
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
