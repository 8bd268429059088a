package agent_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func ExampleHook() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	deleteAll := tool.Must(tool.New("delete_all", "Delete every record.", func(context.Context, struct{}) (string, error) {
		return "deleted", nil
	}))
	// Deny every call of a tool whose name starts with delete_.
	guard := agent.Hook{
		Name: "no-deletes", Event: agent.HookPreToolUse, Matcher: "delete_*",
		Func: func(ctx context.Context, in agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{Action: agent.HookDeny, Reason: "deleting needs a person"}, nil
		},
	}
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "delete_all", `{}`)),
		modeltest.Text("I could not delete the records."),
	)
	a := agent.Must(agent.New("janitor", m, &agent.Options{
		Tools: []tool.Tool{deleteAll}, Hooks: []agent.Hook{guard},
	}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := a.Run(ctx, rt, "clean up", nil)
	if err != nil {
		panic(err)
	}
	call := out.ToolCalls[0]
	fmt.Println(call.Status, "-", call.Result.Text())
	fmt.Println(call.Hooks[0].Hook, call.Hooks[0].Action)
	fmt.Println(out.Output)
	// Output:
	// error - the call was denied by no-deletes: deleting needs a person
	// no-deletes deny
	// I could not delete the records.
}
