package agent_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// ExampleFlowControl holds an agent's runs to one at a time per tenant
// (the prompt's first word): the runs of a tenant wait, as records, for
// the one in progress.
func ExampleFlowControl() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	var mu sync.Mutex
	inProgress, most := map[string]int{}, 0
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		prompt := req.Messages[len(req.Messages)-1].Text()
		tenant, _, _ := strings.Cut(prompt, " ")
		mu.Lock()
		inProgress[tenant]++
		most = max(most, inProgress[tenant])
		mu.Unlock()
		defer func() { mu.Lock(); inProgress[tenant]--; mu.Unlock() }()
		return modeltest.Text("done: " + prompt), nil
	})
	support := agent.Must(agent.New("support", m, &agent.Options{Flow: &agent.FlowControl{
		Key: func(in agent.FlowInput) string {
			tenant, _, _ := strings.Cut(in.Prompt, " ")
			return tenant
		},
		Concurrency: 1,
	}}))
	if err := support.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	var ids []string
	for _, p := range []string{"acme ticket 1", "acme ticket 2", "globex ticket 3"} {
		id, err := support.Submit(ctx, rt, p, nil)
		if err != nil {
			panic(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		out, err := support.Wait(ctx, rt, id)
		if err != nil {
			panic(err)
		}
		fmt.Println(out.Output)
	}
	fmt.Println("most runs of one tenant at once:", most)
	// Output:
	// done: acme ticket 1
	// done: acme ticket 2
	// done: globex ticket 3
	// most runs of one tenant at once: 1
}
