package eventlog_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// A run's events, logged as they happen, read back after the run.
func Example() {
	ctx := context.Background()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	defer func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }()
	rt := agent.NewRuntime(c, st, nil)

	events := eventlog.New(c, st)
	if err := events.Record(ctx, nil); err != nil {
		log.Fatal(err)
	}
	a := agent.Must(agent.NewText("geographer", modeltest.NewTestModel(modeltest.Text("Paris.")), "Answer briefly."))
	if err := a.Serve(ctx, rt, nil); err != nil {
		log.Fatal(err)
	}
	// Follow the log from the start while the run goes on, to its end.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range events.FollowRun(ctx, "r1", 0) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(ev.ID(), strings.TrimPrefix(ev.Message.Channel, "calf.agent.geographer."))
		}
	}()
	if _, err := a.Run(ctx, rt, "The capital of France?", &agent.RunOptions{RunID: "r1"}); err != nil {
		log.Fatal(err)
	}
	<-done
	// Output:
	// r1/1 input
	// r1/2 inference
	// r1/3 output
}
