package brokertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
)

// An adapter's tests run the suite with a function that returns a fresh
// broker, declaring what the adapter cannot do.
func ExampleRun() {
	_ = func(t *testing.T) {
		brokertest.Run(t, func(t *testing.T) calf.Broker {
			b := memory.New(&memory.Options{
				QueueSize: 16,
				Backoff:   func(int) time.Duration { return time.Millisecond },
			})
			t.Cleanup(func() { _ = b.Close() })
			return b
		}, brokertest.Features{QueueSize: 16})
	}
}

// A handler that records effects by message id does each thing once, even
// when every message arrives twice.
func ExampleDuplicatePublishes() {
	inner := memory.New(nil)
	defer inner.Close()
	c := calf.NewClient(brokertest.DuplicatePublishes(inner, 2), nil)
	defer c.Close()
	ctx := context.Background()

	seen := map[string]bool{}
	err := c.Handle(ctx, "orders.placed", func(ctx context.Context, m *calf.Message) error {
		if seen[m.ID] {
			fmt.Println("duplicate of", m.ID, "ignored")
			return nil
		}
		seen[m.ID] = true
		fmt.Println("charging for", m.ID)
		return nil
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Emit(ctx, "orders.placed", map[string]int{"total": 42}, calf.WithID("order-1"), calf.WithKey("order-1")); err != nil {
		fmt.Println(err)
		return
	}
	if err := inner.Drain(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// charging for order-1
	// duplicate of order-1 ignored
}
