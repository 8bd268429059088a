package team_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// seen is the state of the stamp agent: how many prompts it stamped in
// the session.
type seen struct {
	N int `json:"n"`
}

// newStamp serves a custom agent that numbers what it is given, counting
// in its state, with no model.
func newStamp(t *testing.T, e *env) *agent.Custom[seen, string] {
	t.Helper()
	c := agent.Must(agent.NewCustom("stamp", func(sc *agent.StepContext[seen], in []model.Message) (string, error) {
		sc.State.N++
		return fmt.Sprintf("#%d[%s]", sc.State.N, in[len(in)-1].Text()), nil
	}, &agent.CustomOptions{Description: "Numbers what it is given."}))
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// A custom agent is a team member like a model agent: its output is the
// next member's input, its run is a child of the team's, and its events
// are in the team's stream.
func TestCustomAgentMember(t *testing.T) {
	e := newEnv(t, nil)
	stamp := newStamp(t, e)
	w := wrapper(t, e, "writer")
	tm := serve(t, e, team.Must(team.NewSequential("numbered", []team.Member{team.AgentMember(stamp.Agent), team.AgentMember(w.agent)}, nil)))
	var runID string
	var stampEvents []string
	for ev, err := range tm.RunStream(runCtx(t), e.rt, "cats", &team.RunOptions{SessionID: "s"}) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		if ev.Kind == team.EventMember && ev.Agent.Agent == "stamp" {
			stampEvents = append(stampEvents, string(ev.Agent.Kind))
		}
	}
	out, err := tm.Wait(t.Context(), e.rt, runID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "writer(#1[cats])" {
		t.Errorf("output %q; want writer(#1[cats])", out.Output)
	}
	if got := strings.Join(stampEvents, " "); got != "input inference output" {
		t.Errorf("the stamp's events in the team stream: %q", got)
	}
	st, err := e.rt.LoadAgentRun(t.Context(), out.Transcript[0].RunID)
	if err != nil || st.Parent != out.RunID || st.Agent != "stamp" {
		t.Errorf("member run %+v, %v; want a child of %s", st, err, out.RunID)
	}
	// Member runs are outside the team run's session (their messages are
	// not the session's): the member's state is its run's.
	if s, err := stamp.State(t.Context(), e.rt, "s"); err != nil || s.N != 0 {
		t.Errorf("stamp state in session s: %+v, %v; want none", s, err)
	}
}

// A custom agent is a workflow node like a model agent.
func TestCustomAgentWorkflowNode(t *testing.T) {
	e := newEnv(t, nil)
	stamp := newStamp(t, e)
	wf := workflow.New[draft]("numbering", nil).
		Node("stamp", workflow.AgentNode(stamp.Agent,
			func(d draft) (string, error) { return d.Text, nil },
			func(d draft, out string) (draft, error) { d.Text = out; return d, nil })).
		Node("again", workflow.AgentNode(stamp.Agent,
			func(d draft) (string, error) { return d.Text, nil },
			func(d draft, out string) (draft, error) { d.Text = out; return d, nil })).
		Edge(workflow.Start, "stamp").Edge("stamp", "again").Edge("again", workflow.End).
		MustBuild()
	if err := wf.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	final, err := wf.Run(runCtx(t), e.rt, draft{Text: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each node's run is outside a session: each starts from the zero state.
	if final.Text != "#1[#1[x]]" {
		t.Errorf("final state %q; want #1[#1[x]]", final.Text)
	}
}
