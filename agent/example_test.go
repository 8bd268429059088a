package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func Example() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type operands struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in operands) (int, error) {
		return in.A + in.B, nil
	}))
	// A scripted model: call add, then answer.
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("2 + 3 = 5"),
	)
	calc := agent.Must(agent.New("calculator", m, &agent.Options{
		Instructions: "Use the add tool.",
		Tools:        []tool.Tool{add},
	}))
	if err := calc.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := calc.Run(ctx, rt, "add 2 and 3", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	fmt.Println(out.ToolCalls[0].Name, out.ToolCalls[0].Arguments, "=", out.ToolCalls[0].Result.Text())
	fmt.Println("model calls:", out.Steps)
	// Output:
	// 2 + 3 = 5
	// add {"a":2,"b":3} = 5
	// model calls: 2
}

func ExampleAgent_RunStream() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	m := modeltest.NewTestModel(modeltest.Text("Hello there"))
	greeter := agent.Must(agent.New("greeter", m, nil))
	if err := greeter.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	for ev, err := range greeter.RunStream(ctx, rt, "hi", nil) {
		if err != nil {
			panic(err)
		}
		switch ev.Kind {
		case agent.EventDelta:
			fmt.Printf("delta %q\n", ev.Delta.Text)
		case agent.EventOutput:
			fmt.Println("output", ev.Output.Status, string(ev.Output.Content))
		}
	}
	// Output:
	// delta "Hello"
	// delta " there"
	// output complete "Hello there"
}

func ExampleAgent_Run_structured() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type city struct {
		Name    string `json:"name"`
		Country string `json:"country"`
	}
	m := modeltest.NewTestModel(modeltest.Text(`{"name":"Lyon","country":"France"}`))
	geo := agent.Must(agent.NewTyped[city]("geo", m, nil))
	if err := geo.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := geo.Run(ctx, rt, "Which city is famous for its traboules?", nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", out.Output)
	// Output: {Name:Lyon Country:France}
}

func ExampleRunOptions_session() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	// A model that says how many user messages it sees.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		n := 0
		for _, msg := range req.Messages {
			if msg.Role == model.RoleUser {
				n++
			}
		}
		return modeltest.Text(fmt.Sprintf("I have seen %d messages from you.", n)), nil
	})
	chat := agent.Must(agent.New("chat", m, nil))
	if err := chat.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	for _, prompt := range []string{"hello", "are you there?"} {
		out, err := chat.Run(ctx, rt, prompt, &agent.RunOptions{SessionID: "s1"})
		if err != nil {
			panic(err)
		}
		fmt.Println(out.Output)
	}
	// Output:
	// I have seen 1 messages from you.
	// I have seen 2 messages from you.
}
