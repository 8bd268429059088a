package host_test

import (
	"context"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// The seed's flow served by a host: the user asks the conversational agent
// for a document; its model (scripted here) starts the docmem agent, sends
// it a command, and answers the user.
func ExampleHost() {
	ctx := context.Background()
	st := storemem.New()
	client := calf.NewClient(memory.New(nil), nil)
	defer client.Close()
	rt := agent.NewRuntime(client, st, nil)

	const id = "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f"
	ps, err := conversation.LoadFile("../testdata/conversations.yaml")
	if err != nil {
		panic(err)
	}
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(ctx, ps, false); err != nil {
		panic(err)
	}
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("call_1", "start_conversation", `{"prototype":"docmem-agent"}`)),
		modeltest.ToolCalls(modeltest.Call("call_2", "send", `{"agent":"docmem-agent","command":["docmem-create","project-notes"]}`)),
		modeltest.Text("I've created the docmem 'project-notes' for you."),
	)
	host := host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return m, nil },
		Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(st, nil).CodeHandler()},
	})
	if err := host.Serve(ctx); err != nil {
		panic(err)
	}

	c, err := convs.Create(ctx, conversation.NewConversation{ID: id, UserID: "u1"})
	if err != nil {
		panic(err)
	}
	// The user's side: a request on user -> entry, answered on entry -> user
	// with its correlation id.
	in, _ := conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
	out, _ := conversation.Channel(c.ID, c.Entry, conversation.UserParticipant)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reply, err := client.Request(wctx, in, conversation.ConversationMessage{
		ConversationID: c.ID, UserID: "u1", Message: "Create a docmem called project-notes",
		Timestamp: time.Now().UTC(), CorrelationID: "q1",
	}, out, calf.WithKey(c.ID), calf.WithMetadata(calf.Metadata{CorrelationID: "q1"}))
	if err != nil {
		panic(err)
	}
	answer, _ := conversation.DecodeMessage(reply.Data)
	fmt.Println(answer.AgentID)
	fmt.Println(answer.Message)
	// Output:
	// conversational-agent-0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f
	// I've created the docmem 'project-notes' for you.
}
