package approval_test

import (
	"context"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func ExampleRespond() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	type deploy struct {
		Env string `json:"env"`
	}
	release := tool.Must(tool.New("deploy", "Deploy the build.", func(_ context.Context, in deploy) (string, error) {
		return "deployed to " + in.Env, nil
	}))
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{"env":"production"}`)),
		modeltest.Text("Done."),
	)
	ops := agent.Must(agent.New("ops", m, &agent.Options{
		Tools:       []tool.Tool{release},
		Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits}, // deploy is an execute tool: ask
	}))
	if err := ops.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	done := make(chan *agent.Output[string])
	go func() {
		out, err := ops.Run(ctx, rt, "ship it", &agent.RunOptions{RunID: "run-1"})
		if err != nil {
			panic(err)
		}
		done <- out
	}()

	// A person, in this process or another, answers the request.
	var reqs []approval.Approval
	for wait := time.NewTicker(10 * time.Millisecond); len(reqs) == 0; {
		select {
		case <-wait.C:
		case <-ctx.Done():
			panic("no approval request")
		}
		reqs, _ = approval.List(ctx, rt.Store(), "run-1", approval.Pending)
	}
	fmt.Println(reqs[0].ToolName, string(reqs[0].Arguments))
	_, err := approval.Respond(ctx, rt.Store(), rt.Client(), reqs[0].ID, approval.Answer{
		Approve: true, Arguments: []byte(`{"env":"staging"}`), Digest: reqs[0].Digest,
	})
	if err != nil {
		panic(err)
	}
	out := <-done
	fmt.Println(out.ToolCalls[0].Result.Text())
	// Output:
	// deploy {"env":"production"}
	// deployed to staging
}
