package adapters_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
)

// A program opens the broker and the store its configuration names. Here
// both live in memory; in production the URLs would be, for example,
// nats://nats-1:4222,nats-2:4222 and postgres://calf@db:5432/calf.
func Example() {
	ctx := context.Background()
	b, err := adapters.OpenBroker(ctx, "memory://", nil)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	s, err := adapters.OpenStore(ctx, "memory:", nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	fmt.Println(adapters.Redact("postgres://calf:hunter2@db:5432/calf"))
	// Output: postgres://calf:xxxxx@db:5432/calf
}
