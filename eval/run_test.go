package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/tool"
	"github.com/joshdk/go-junit"
)

type operands struct {
	A int `json:"a"`
	B int `json:"b"`
}

// calculator returns an agent that adds with its tool when asked to add
// (or subtracts when broken), and answers anything else directly; and the
// count of its model calls.
func calculator(t *testing.T, broken bool) (*agent.Agent[string], *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in operands) (int, error) {
		if broken {
			return in.A - in.B, nil
		}
		return in.A + in.B, nil
	}))
	m := func(_ context.Context, req *model.Request) (*model.Response, error) {
		calls.Add(1)
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == model.RoleTool:
			return modeltest.Text("The result is " + last.Text() + "."), nil
		case strings.Contains(last.Text(), "2 + 3"):
			return modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)), nil
		}
		return modeltest.Text("I only add."), nil
	}
	return agent.Must(agent.New("calculator", modeltest.FunctionModel(m), &agent.Options{Tools: []tool.Tool{add}})), &calls
}

const calcSet = `
name: calc
cases:
  - id: add
    input: What is 2 + 3?
    expect: {contains: ["5"]}
    trajectory: {calls: [{tool: add, args: {a: 2, b: 3}}]}
    budget: {max_model_calls: 2}
    repeats: 3
    tags: [math]
  - id: refuse
    input: Write a poem.
    expect: {contains: [only add]}
    trajectory: {calls: []}
`

func TestRun(t *testing.T) {
	set := mustSet(t, calcSet)
	a, calls := calculator(t, false)
	rt := local.New(nil)
	var progress atomic.Int64
	rep, err := eval.Run(t.Context(), rt, runner.Agent(a), set, &eval.RunOptions{ID: "e1", Progress: func(eval.CaseRun, int, int) { progress.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() != 2 || len(rep.Cases) != 2 || len(rep.Cases[0].Runs) != 3 || progress.Load() != 4 {
		t.Fatalf("report: %+v", rep)
	}
	run := rep.Cases[0].Runs[1]
	if run.RunID != "e1-add-1" || run.Observed.ModelCalls != 2 || len(run.Observed.ToolCalls) != 1 || run.Observed.Latency <= 0 {
		t.Errorf("a run of add: %+v", run)
	}
	if got := rep.Cases[0].PassHatK(3); got != 1 {
		t.Errorf("pass^3 of add: %v", got)
	}
	// The same set run again under its id starts no run: 3 + 1 runs, two
	// model calls for each of add's and one for refuse's.
	before := calls.Load()
	if before != 7 {
		t.Errorf("%d model calls, want 7", before)
	}
	if rep, err = eval.Run(t.Context(), rt, runner.Agent(a), set, &eval.RunOptions{ID: "e1"}); err != nil || rep.Passed() != 2 {
		t.Fatalf("again: %+v, %v", rep, err)
	}
	if calls.Load() != before {
		t.Errorf("running the set again under its id made %d model calls", calls.Load()-before)
	}
	// Tags select cases.
	if rep, err = eval.Run(t.Context(), rt, runner.Agent(a), set, &eval.RunOptions{Tags: []string{"math"}}); err != nil || len(rep.Cases) != 1 || rep.Cases[0].Case != "add" {
		t.Fatalf("math only: %+v, %v", rep, err)
	}
}

// A broken tool fails the cases it touches, each named with why, in the
// JSON and JUnit reports.
func TestRunGatesABrokenTool(t *testing.T) {
	set := mustSet(t, calcSet)
	a, _ := calculator(t, true)
	rep, err := eval.Run(t.Context(), local.New(nil), runner.Agent(a), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() != 1 || rep.Cases[0].Pass || rep.Cases[0].Passed != 0 || !rep.Cases[1].Pass {
		t.Fatalf("report: %+v", rep)
	}
	f := rep.Cases[0].Runs[0].Result.Failed()
	if len(f) != 1 || f[0].Name != "answer.contains" || !strings.Contains(f[0].Detail, "-1") {
		t.Errorf("failed: %+v", f)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	// Read back by a JUnit consumer.
	suites, err := junit.Ingest(buf.Bytes())
	if err != nil || len(suites) != 1 {
		t.Fatalf("%d suites, %v\n%s", len(suites), err, buf.String())
	}
	s := suites[0]
	s.Aggregate()
	if s.Name != "calc" || s.Totals.Tests != 2 || s.Totals.Failed != 1 || s.Totals.Passed != 1 {
		t.Errorf("suite %s: %+v\n%s", s.Name, s.Totals, buf.String())
	}
	add := s.Tests[0]
	var body string
	if e, ok := add.Error.(junit.Error); ok {
		body = e.Body
	}
	if add.Name != "add" || add.Status != junit.StatusFailed || add.Message != "3 of 3 runs failed" ||
		!strings.Contains(body, "answer.contains") || s.Tests[1].Status != junit.StatusPassed {
		t.Errorf("tests: %+v\n%s", s.Tests, buf.String())
	}
}
