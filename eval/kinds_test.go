package eval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

type doc struct{ Text string }

// A set runs against a workflow and a team the same way: their answers
// are checked; a broken node fails the case.
func TestRunWorkflowAndTeam(t *testing.T) {
	set := mustSet(t, `
cases:
  - {id: shout, input: hello, expect: {equals: HELLO!}}
  - {id: empty, input: " x ", expect: {contains: [X]}}
`)
	wf := func(name, suffix string) runner.Runner {
		w := workflow.New[doc](name, nil).
			Node("up", workflow.Func(func(_ context.Context, s doc) (doc, error) {
				s.Text = strings.ToUpper(strings.TrimSpace(s.Text)) + suffix
				return s, nil
			})).
			Edge(workflow.Start, "up").Edge("up", workflow.End).MustBuild()
		return runner.Workflow(w, "Shouts.", func(p string) (doc, error) { return doc{Text: p}, nil }, func(s doc) (string, error) { return s.Text, nil })
	}
	rep, err := eval.Run(t.Context(), local.New(nil), wf("shouter", "!"), set, nil)
	if err != nil || rep.Passed() != 2 {
		t.Fatalf("workflow: %+v, %v", rep, err)
	}
	if rep, err = eval.Run(t.Context(), local.New(nil), wf("broken", "?"), set, nil); err != nil || rep.Passed() != 1 || rep.Cases[0].Pass {
		t.Fatalf("a broken workflow: %+v, %v", rep, err)
	}

	calc, _ := calculator(t, false)
	tm, err := team.NewSequential("desk", []team.Member{team.AgentMember(calc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tset := mustSet(t, calcSet)
	tset.Cases[0].Trajectory, tset.Cases[1].Trajectory = nil, nil // a team's answer only
	tset.Cases[0].Budget = nil
	if rep, err = eval.Run(t.Context(), local.New(nil), runner.Team(tm), tset, nil); err != nil || rep.Passed() != 2 {
		t.Fatalf("team: %+v, %v", rep, err)
	}
}
