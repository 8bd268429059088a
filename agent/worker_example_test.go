package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// A worker process serves agents on a shared broker until it is told to
// stop, then drains. Here the broker is in memory and the caller is in
// the same process; in production the broker is NATS or Kafka, the store
// PostgreSQL or Redis, and callers run elsewhere.
func ExampleWorker() {
	ctx, stop := context.WithCancel(context.Background())
	b := memory.New(nil)
	defer b.Close()
	st := storemem.New()

	w := agent.NewWorker(b, st, nil)
	greeter := agent.Must(agent.New("greeter", modeltest.NewTestModel(modeltest.Text("Hello!")), nil))
	if err := greeter.Serve(ctx, w.Runtime(), nil); err != nil {
		panic(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }() // until SIGTERM, in a real worker

	caller := agent.NewRuntime(calf.NewClient(b, nil), st, nil)
	out, err := greeter.Run(context.Background(), caller, "hi", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	stop()
	fmt.Println("drained:", <-ran == nil)
	// Output:
	// Hello!
	// drained: true
}
