package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/workflow"
)

// echo returns a served agent that answers name(prompt).
func echo(t *testing.T, rt *agent.Runtime, name string) *agent.Agent[string] {
	t.Helper()
	a := agent.Must(agent.New(name, modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(name + "(" + req.Messages[len(req.Messages)-1].Text() + ")"), nil
	}), nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

func agentStep(a *agent.Agent[string]) workflow.Node[doc] {
	return workflow.AgentNode(a, func(s doc) (string, error) { return s.Text, nil },
		func(s doc, out string) (doc, error) { s.Text = out; return s, nil })
}

// awaitAgentRun waits until the agent run id, read from the store,
// passes cond.
func awaitAgentRun(t *testing.T, rt *agent.Runtime, id string, cond func(*agent.RunInfo) bool) *agent.RunInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if info, err := rt.LoadAgentRun(ctx, id); err == nil && cond(info) {
			return info
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agent run %s: not as awaited in time", id)
		case <-time.After(wait):
		}
	}
}

// A workflow run's budget bounds its child runs together, through a
// sub-workflow too: the agent node gets all of it, the sub-workflow what
// is left (none), and its own agent node pauses before its model call
// until the budget is raised by name on the outer run; then the run
// completes.
func TestBudgetPausesChildUntilRaised(t *testing.T) {
	rt := newRuntime(t)
	first, second := echo(t, rt, "first"), echo(t, rt, "second")
	inner := workflow.New[doc]("inner", nil).Node("second", agentStep(second)).
		Edge(workflow.Start, "second").Edge("second", workflow.End).MustBuild()
	outer := workflow.New[doc]("outer", nil).Node("first", agentStep(first)).
		Node("sub", workflow.SubWorkflow(inner, func(s doc) (doc, error) { return s, nil }, func(_ doc, f doc) (doc, error) { return f, nil })).
		Edge(workflow.Start, "first").Edge("first", "sub").Edge("sub", workflow.End).MustBuild()
	serve(t, inner, rt)
	serve(t, outer, rt)
	ctx := t.Context()
	if _, err := outer.Submit(ctx, rt, doc{Text: "x"}, &workflow.RunOptions{RunID: "w1", Budget: &agent.Budget{MaxTokens: -5}}); err == nil {
		t.Fatal("a negative budget was taken")
	}
	if _, err := outer.Submit(ctx, rt, doc{Text: "x"}, &workflow.RunOptions{RunID: "w1", Budget: &agent.Budget{MaxModelCalls: 1}}); err != nil {
		t.Fatal(err)
	}
	paused := awaitAgentRun(t, rt, "w1.2.sub.1.second", func(r *agent.RunInfo) bool { return r.Paused })
	if paused.Pause == nil || paused.Pause.Budget == nil || paused.Budget == nil || paused.Budget.MaxModelCalls != -1 {
		t.Fatalf("the sub-workflow's agent paused with %+v, budget %+v; want a budget pause with none left", paused.Pause, paused.Budget)
	}
	if r, err := rt.LoadAgentRun(ctx, "w1.1.first"); err != nil || r.Budget == nil || *r.Budget != (agent.Budget{MaxModelCalls: 1}) {
		t.Errorf("the first agent node's run: %+v (%v), want the run's budget", r, err)
	}
	if r, err := inner.LoadRun(ctx, rt, "w1.2.sub"); err != nil || r.Budget == nil || r.Budget.MaxModelCalls != -1 {
		t.Errorf("the sub-workflow's run: %+v (%v), want a budget used up", r, err)
	}

	v, err := rt.SetBudget(ctx, agent.RunRef{Kind: "workflow", Name: "outer", RunID: "w1"}, &agent.Budget{MaxModelCalls: 2})
	if err != nil {
		t.Fatalf("SetBudget: %v", err)
	}
	if r := v.(*workflow.RunInfo); r.Budget == nil || r.Budget.MaxModelCalls != 2 {
		t.Errorf("SetBudget's view has budget %+v", r.Budget)
	}
	got, err := outer.Wait(ctx, rt, "w1")
	if err != nil {
		t.Fatalf("Wait after the budget was raised: %v", err)
	}
	if got.Text != "second(first(x))" {
		t.Errorf("state %+v", got)
	}
	if r, err := inner.LoadRun(ctx, rt, "w1.2.sub"); err != nil || r.Budget == nil || r.Budget.MaxModelCalls != 1 {
		t.Errorf("the sub-workflow's run after the raise: %+v (%v), want the 1 call left", r, err)
	}
	if r, err := outer.LoadRun(ctx, rt, "w1"); err != nil || r.Usage.Requests != 2 {
		t.Errorf("the run's usage: %+v (%v)", r, err)
	}
	if _, err := rt.SetBudget(ctx, agent.RunRef{Kind: "workflow", Name: "outer", RunID: "w1"}, nil); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("SetBudget of an ended run = %v, want ErrRunEnded", err)
	}
}
