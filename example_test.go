package calf_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
)

func ExampleClient_Request() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()

	// A service: upper-cases what it gets and replies. Emit inside the
	// handler carries the request's correlation id.
	err := c.Handle(ctx, "svc.upper", func(ctx context.Context, m *calf.Message) error {
		var s string
		if err := m.Decode(&s); err != nil {
			return calf.Permanent(err) // never retried: dead-lettered at once
		}
		_, err := c.Emit(ctx, "svc.upper.reply", strings.ToUpper(s))
		return err
	}, &calf.SubscribeOptions{Group: "upper"})
	if err != nil {
		panic(err)
	}
	reply, err := c.Request(ctx, "svc.upper", "hello", "svc.upper.reply")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(reply.Data))
	// Output: "HELLO"
}

func ExampleMatchChannel() {
	fmt.Println(calf.MatchChannel("calf.agent.*.output", "calf.agent.calc.output"))
	fmt.Println(calf.MatchChannel("calf.agent.calc.>", "calf.agent.calc.tool_call.add"))
	fmt.Println(calf.MatchChannel("calf.agent.*", "calf.agent.calc.output"))
	// Output:
	// true
	// true
	// false
}
