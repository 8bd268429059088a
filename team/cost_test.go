package team_test

import (
	"context"
	"math"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

// priced marks a response as gpt-4o-mini's, with 1,000 input and 100
// output tokens: $0.00021 at the default prices.
func priced(r *model.Response) *model.Response {
	r.Model = "gpt-4o-mini"
	r.Usage = model.Usage{Requests: 1, InputTokens: 1000, OutputTokens: 100, TotalTokens: 1100}
	return r
}

// A team whose member calls a subagent reports the sum of every run's
// usage and cost: the members', the subagent's, and an unpriced model's.
func TestTeamUsageAndCostRollUp(t *testing.T) {
	e := newEnv(t, nil)
	helper := agent.Must(agent.New("helper", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return priced(modeltest.Text("found it")), nil
	}), nil))
	researcher := agent.Must(agent.New("researcher", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return priced(modeltest.Text("research: " + last.Text())), nil
		}
		return priced(modeltest.ToolCalls(modeltest.Call("h1", "helper", `{"input":"look"}`))), nil
	}), &agent.Options{Tools: []tool.Tool{tool.Must(agent.AsTool(helper, nil))}}))
	writer := agent.Must(agent.New("writer", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		r := priced(modeltest.Text("written"))
		r.Model = "local-llm" // not in the price table
		return r, nil
	}), nil))
	for _, a := range []*agent.Agent[string]{helper, researcher, writer} {
		if err := a.Serve(t.Context(), e.rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	tm := serve(t, e, team.Must(team.NewSequential("crew", []team.Member{team.AgentMember(researcher), team.AgentMember(writer)}, nil)))
	out, err := tm.Run(runCtx(t), e.rt, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	const call = (1000*0.15 + 100*0.60) / 1e6
	if out.Usage.Requests != 4 || out.Usage.TotalTokens != 4400 {
		t.Errorf("usage %+v: want the 4 calls of the researcher (2), its helper (1) and the writer (1)", out.Usage)
	}
	if math.Abs(out.Cost.USD-3*call) > 1e-12 || len(out.Cost.Unpriced) != 1 || out.Cost.Unpriced[0] != "local-llm" {
		t.Errorf("cost %+v: want 3 priced calls and local-llm unpriced", out.Cost)
	}
}
