package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// An agent whose session keeps only the user's messages and its answers:
// the tool call and its result stay in the run's record.
func ExampleOptions_sessionAnswersOnly() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	st := storemem.New()
	rt := agent.NewRuntime(calf.NewClient(b, nil), st, nil)

	type operands struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in operands) (int, error) {
		return in.A + in.B, nil
	}))
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("2 + 3 = 5"),
	)
	calc := agent.Must(agent.New("calculator", m, &agent.Options{
		Tools:              []tool.Tool{add},
		SessionAnswersOnly: true,
	}))
	if err := calc.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := calc.Run(ctx, rt, "add 2 and 3", &agent.RunOptions{SessionID: "s1"})
	if err != nil {
		panic(err)
	}
	info, err := rt.LoadAgentRun(ctx, out.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println("the run:", len(info.NewMessages()), "messages,", len(info.ToolCalls), "tool call")
	s, err := session.Load(ctx, st, "s1")
	if err != nil {
		panic(err)
	}
	for _, msg := range s.Messages {
		fmt.Printf("the session: %s: %s\n", msg.Role, msg.Text())
	}
	// Output:
	// the run: 4 messages, 1 tool call
	// the session: user: add 2 and 3
	// the session: assistant: 2 + 3 = 5
}
