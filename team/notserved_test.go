package team_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// On a runtime that does not serve on demand, a team served without its
// member, and a workflow served without its agent node's agent, fail fast
// with an error that names the agent no process serves and what to do,
// instead of waiting in silence for their timeout.
func TestMemberNotServedFailsFast(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m := modeltest.NewTestModel(modeltest.Text("never"))
	absent := agent.Must(agent.NewText("unserved_member", m, ""))
	tm := team.Must(team.NewSequential("lonely_team", []team.Member{team.AgentMember(absent)}, nil))
	if err := tm.Serve(ctx, e.rt, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := tm.Run(ctx, e.rt, "hi", nil)
	if err == nil {
		t.Fatalf("team Run: %+v, want an error", out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the team failed after %s", d)
	}
	if s := err.Error(); !strings.Contains(s, "no process serves the agent unserved_member") || !strings.Contains(s, "calf worker") {
		t.Errorf("team Run: %v; want the member no process serves named, with what to do", err)
	}
	if !errors.Is(err, agent.ErrNotServed) || !errors.Is(err, agent.ErrRunFailed) {
		t.Errorf("team Run: %v; want it to match agent.ErrNotServed and agent.ErrRunFailed", err)
	}

	type st struct{ S string }
	w := workflow.New[st]("lonely_flow", nil).
		Node("ask", workflow.AgentNode(absent, func(st) (string, error) { return "x", nil }, func(s st, out string) (st, error) { return st{out}, nil })).
		Edge(workflow.Start, "ask").Edge("ask", workflow.End).
		MustBuild()
	if err := w.Serve(ctx, e.rt, nil); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := w.Run(ctx, e.rt, st{}, nil); err == nil {
		t.Fatal("workflow Run: no error")
	} else if s := err.Error(); !strings.Contains(s, "no process serves the agent unserved_member") {
		t.Errorf("workflow Run: %v; want the agent no process serves named", err)
	} else if !errors.Is(err, agent.ErrNotServed) {
		t.Errorf("workflow Run: %v; want it to match agent.ErrNotServed", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the workflow failed after %s", d)
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("the unserved agent's model got %d requests", n)
	}
}
