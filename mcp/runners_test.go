package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

type draft struct {
	Text string `json:"text"`
}

// A team and a workflow offered as tools: each call is a run of theirs.
func TestServerTeamAndWorkflow(t *testing.T) {
	rt := newRuntime(t)
	ctx := runCtx(t)
	upper := agent.Must(agent.NewCustom("upper", func(_ *agent.StepContext[struct{}], in []model.Message) (string, error) {
		return strings.ToUpper(in[len(in)-1].Text()), nil
	}, nil))
	if err := upper.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := team.Must(team.NewSequential("shouters", []team.Member{team.AgentMember(upper.Agent)}, &team.Options{Description: "Shouts."}))
	if err := tm.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	wf := workflow.New[draft]("exclaim", nil).
		Node("bang", workflow.Func(func(_ context.Context, d draft) (draft, error) { d.Text += "!"; return d, nil })).
		Edge(workflow.Start, "bang").Edge("bang", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(rt, nil)
	if err := s.AddRunner(runner.Team(tm)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRunner(runner.Workflow(wf, "Adds an exclamation mark.",
		func(p string) (draft, error) { return draft{Text: p}, nil },
		func(d draft) (string, error) { return d.Text, nil })); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler(nil))
	defer srv.Close()
	c, err := mcp.New(mcp.Config{Name: "r", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range tools {
		res, err := tl.Call(ctx, json.RawMessage(`{"prompt":"hey"}`))
		if err != nil {
			t.Fatal(err)
		}
		got[tl.Definition().Name] = res.Text()
	}
	if got["r__shouters"] != "HEY" || got["r__exclaim"] != "hey!" {
		t.Errorf("results %v", got)
	}
}
