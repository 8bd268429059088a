package session_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// Two runs in a session, then the session read, forked and moved to
// another store through its export.
func Example() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, storemem.New(), nil)
	m := modeltest.NewTestModel(modeltest.Text("Hello, Ada."), modeltest.Text("Your name is Ada."))
	chat := agent.Must(agent.NewText("chat", m, "Answer briefly."))
	if err := chat.Serve(ctx, rt, nil); err != nil {
		log.Fatal(err)
	}
	for _, prompt := range []string{"I am Ada.", "What is my name?"} {
		if _, err := chat.Run(ctx, rt, prompt, &agent.RunOptions{SessionID: "chat-1"}); err != nil {
			log.Fatal(err)
		}
	}

	s, err := session.Load(ctx, rt.Store(), "chat-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q: %d messages, %d runs\n", s.Title, len(s.Messages), len(s.Runs))

	fork, err := session.Fork(ctx, rt.Store(), "chat-1", &session.ForkOptions{At: 2, ID: "chat-1b"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d messages, from %s\n", fork.ID, len(fork.Messages), fork.ForkedFrom.Session)

	data, err := session.Export(ctx, rt.Store(), "chat-1")
	if err != nil {
		log.Fatal(err)
	}
	elsewhere := storemem.New()
	copied, err := session.Import(ctx, elsewhere, data, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(copied.ID, copied.Messages[3].Text())
	// Output:
	// "I am Ada.": 4 messages, 2 runs
	// chat-1b: 2 messages, from chat-1
	// chat-1 Your name is Ada.
}
