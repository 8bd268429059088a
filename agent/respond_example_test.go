package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func ExampleRuntime_Respond() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	deploy := tool.Must(tool.New("deploy", "Deploy the build.", func(_ context.Context, in struct {
		Env string `json:"env"`
	}) (string, error) {
		return "deployed to " + in.Env, nil
	}))
	ops := agent.Must(agent.New("ops", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{"env":"production"}`)),
		modeltest.Text("Done."),
	), &agent.Options{
		Tools:       []tool.Tool{deploy},
		Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits}, // deploy executes: ask
	}))
	if err := ops.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	for ev, err := range ops.RunStream(ctx, rt, "ship it", nil) {
		if err != nil {
			panic(err)
		}
		switch {
		case ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending:
			fmt.Println("asked:", ev.Approval.ToolName, string(ev.Approval.Arguments))
			// The answer, recorded and published with the runtime's store
			// and client.
			if _, err := rt.Respond(ctx, ev.Approval.ID, approval.Answer{Approve: true, Digest: ev.Approval.Digest}); err != nil {
				panic(err)
			}
		case ev.Kind == agent.EventToolResult:
			fmt.Println("result:", ev.ToolResult.Result)
		case ev.Kind == agent.EventOutput:
			fmt.Println("output:", ev.Output)
		}
	}
	// Output:
	// asked: deploy {"env":"production"}
	// result: deployed to production
	// output: Done.
}

func TestRuntimeRespondNil(t *testing.T) {
	var rt *agent.Runtime
	if _, err := rt.Respond(t.Context(), "r/c", approval.Answer{Approve: true}); !errors.Is(err, agent.ErrNoRuntime) {
		t.Errorf("Respond on a nil runtime: %v", err)
	}
}
