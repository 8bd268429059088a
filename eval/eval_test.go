package eval_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/model"
)

const setYAML = `
name: calculator
cases:
  - id: add
    input: What is 2 + 3?
    history:
      - {role: user, content: hi}
      - {role: assistant, content: hello}
    expect:
      contains: ["5"]
      not_contains: ["error"]
      regex: '^The (sum|result) is \d+'
    trajectory:
      mode: in_order
      calls:
        - tool: add
          args: {a: 2, b: 3}
    budget: {max_tokens: 1000, max_model_calls: 3, max_latency: 2s, max_cost_usd: 0.01}
    tags: [math]
    repeats: 3
  - id: structured
    input: Give me the total.
    expect:
      schema:
        type: object
        properties: {total: {type: number}}
        required: [total]
      fields: {total: 5, items.0.name: pen}
`

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	s, err := eval.Load(write(t, "calc.yaml", setYAML))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "calculator" || len(s.Cases) != 2 {
		t.Fatalf("set %q with %d cases", s.Name, len(s.Cases))
	}
	c := s.Cases[0]
	if c.Repeats != 3 || len(c.History) != 2 || c.Budget.MaxLatency != eval.Duration(2*time.Second) || c.Trajectory.Mode != eval.TrajectoryInOrder {
		t.Errorf("case add: %+v", c)
	}
	if got := string(c.Trajectory.Calls[0].Args); got != `{"a":2,"b":3}` {
		t.Errorf("args kept as JSON: %s", got)
	}
	if !json.Valid(s.Cases[1].Expect.Schema) {
		t.Errorf("schema kept as JSON: %s", s.Cases[1].Expect.Schema)
	}

	// The same cases as JSON Lines.
	var lines []string
	for _, c := range s.Cases {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	j, err := eval.Load(write(t, "calc.jsonl", strings.Join(lines, "\n\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "calc" || len(j.Cases) != 2 || j.Cases[0].Budget.MaxLatency != c.Budget.MaxLatency {
		t.Errorf("JSONL set %q: %+v", j.Name, j.Cases)
	}
}

// Every problem of a set is reported at once, with the case it is in.
func TestLoadProblems(t *testing.T) {
	bad := `
cases:
  - id: a
    input: x
    expect: {regex: "("}
  - id: a
    input: y
    trajectory: {mode: sideways, calls: [{tool: ""}]}
  - input: z
    repeats: 1000
  - id: h
    input: w
    history: [{role: system, content: no}]
`
	_, err := eval.Load(write(t, "bad.yml", bad))
	if err == nil {
		t.Fatal("a set with problems loaded")
	}
	for _, want := range []string{"expect.regex", "used by an earlier case", "sideways", "no tool", "no id", "repeats is 1 to 100", `not "system"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if _, err := eval.Load(write(t, "x.yaml", "cases:\n  - id: a\n    input: x\n    exepct: {}\n")); err == nil || !strings.Contains(err.Error(), "exepct") {
		t.Errorf("an unknown field: %v", err)
	}
	if _, err := eval.Load(write(t, "x.jsonl", `{"id":"a","input":"x"}`+"\n"+`{"id":"b","inptu":"y"}`)); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("an unknown field in JSONL: %v", err)
	}
	if _, err := eval.Load(write(t, "x.txt", "")); err == nil {
		t.Error("a .txt file loaded")
	}
}

func mustSet(t *testing.T, text string) *eval.Set {
	t.Helper()
	s, err := eval.ParseYAML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func calls(spec ...string) []eval.Call {
	var out []eval.Call
	for i := 0; i < len(spec); i += 2 {
		out = append(out, eval.Call{Tool: spec[i], Args: json.RawMessage(spec[i+1])})
	}
	return out
}

func TestTrajectoryModes(t *testing.T) {
	expected := `
cases:
  - id: c
    input: x
    trajectory:
      mode: MODE
      calls:
        - {tool: search, args: {q: go}, args_match: subset}
        - {tool: read}
`
	made := map[string][]eval.Call{
		"same":       calls("search", `{"q":"go","n":3}`, "read", `{"path":"a"}`),
		"reversed":   calls("read", `{}`, "search", `{"q":"go"}`),
		"extra":      calls("search", `{"q":"go"}`, "write", `{}`, "read", `{}`),
		"fewer":      calls("read", `{}`),
		"wrong args": calls("search", `{"q":"rust"}`, "read", `{}`),
		"none":       nil,
	}
	want := map[string]map[string]bool{
		"exact":     {"same": true},
		"in_order":  {"same": true, "extra": true},
		"any_order": {"same": true, "reversed": true},
		"subset":    {"same": true, "reversed": true, "fewer": true, "none": true},
		"superset":  {"same": true, "reversed": true, "extra": true},
	}
	for mode, passes := range want {
		c := &mustSet(t, strings.Replace(expected, "MODE", mode, 1)).Cases[0]
		for name, m := range made {
			r := eval.Score(c, eval.Observed{ToolCalls: m})
			if r.Pass != passes[name] {
				t.Errorf("%s, calls %s: pass %v, want %v (%+v)", mode, name, r.Pass, passes[name], r.Checks)
			}
			if !r.Pass && !strings.Contains(r.Checks[0].Detail, "expected ("+mode+")") {
				t.Errorf("%s, calls %s: the failure does not say what was expected: %q", mode, name, r.Checks[0].Detail)
			}
		}
	}
	// Arguments compared exactly by default.
	c := &mustSet(t, "cases: [{id: c, input: x, trajectory: {calls: [{tool: add, args: {a: 2, b: 3}}]}}]").Cases[0]
	if !eval.Score(c, eval.Observed{ToolCalls: calls("add", `{"b":3,"a":2.0}`)}).Pass {
		t.Error("the same arguments in another order did not match")
	}
	if eval.Score(c, eval.Observed{ToolCalls: calls("add", `{"a":2,"b":3,"c":1}`)}).Pass {
		t.Error("an extra argument matched exactly")
	}
	// Any order needs each expected call matched by a call of its own.
	c = &mustSet(t, "cases: [{id: c, input: x, trajectory: {mode: superset, calls: [{tool: f}, {tool: f, args: {x: 1}}]}}]").Cases[0]
	if !eval.Score(c, eval.Observed{ToolCalls: calls("f", `{"x":1}`, "f", `{"x":2}`)}).Pass {
		t.Error("two calls of f did not cover the two expected")
	}
	if eval.Score(c, eval.Observed{ToolCalls: calls("f", `{"x":1}`)}).Pass {
		t.Error("one call covered two expected")
	}
}

func TestAnswerChecks(t *testing.T) {
	s := mustSet(t, setYAML)
	add, structured := &s.Cases[0], &s.Cases[1]
	cases := []struct {
		c      *eval.Case
		out    string
		pass   bool
		failed string
	}{
		{add, "The result is 5.", true, ""},
		{add, "The result is 6.", false, "answer.contains"},
		{add, "The result is 5, no error.", false, "answer.not_contains"},
		{add, "It is 5.", false, "answer.regex"},
		{structured, `{"total": 5, "items": [{"name": "pen"}]}`, true, ""},
		{structured, `{"total": "5", "items": [{"name": "pen"}]}`, false, "answer.schema"},
		{structured, `{"total": 6, "items": [{"name": "pen"}]}`, false, "answer.fields"},
		{structured, `{"total": 5, "items": []}`, false, "answer.fields"},
		{structured, `five`, false, "answer.schema"},
	}
	for _, tc := range cases {
		r := eval.Score(tc.c, eval.Observed{Output: tc.out, ToolCalls: calls("add", `{"a":2,"b":3}`)})
		if r.Pass != tc.pass {
			t.Errorf("%s %q: pass %v, want %v: %+v", tc.c.ID, tc.out, r.Pass, tc.pass, r.Failed())
			continue
		}
		if !tc.pass && (len(r.Failed()) == 0 || r.Failed()[0].Name != tc.failed || r.Failed()[0].Detail == "") {
			t.Errorf("%s %q: failed %+v, want %s with a detail", tc.c.ID, tc.out, r.Failed(), tc.failed)
		}
	}
	eq := mustSet(t, `cases: [{id: e, input: x, expect: {equals: '{"a": [1, 2]}'}}, {id: i, input: y, expect: {contains: [PARIS], ignore_case: true}}]`).Cases
	if !eval.Score(&eq[0], eval.Observed{Output: ` {"a":[1,2.0]}`}).Pass || eval.Score(&eq[0], eval.Observed{Output: `{"a":[2,1]}`}).Pass {
		t.Error("equals does not compare JSON values")
	}
	if !eval.Score(&eq[1], eval.Observed{Output: "It is Paris."}).Pass {
		t.Error("ignore_case did not")
	}
}

func TestBudgets(t *testing.T) {
	c := &mustSet(t, setYAML).Cases[0]
	ok := eval.Observed{Output: "The sum is 5", ToolCalls: calls("add", `{"a":2,"b":3}`), Tokens: 900, ModelCalls: 2, Latency: time.Second, CostUSD: 0.005}
	if r := eval.Score(c, ok); !r.Pass {
		t.Fatalf("within budget: %+v", r.Failed())
	}
	for name, o := range map[string]eval.Observed{
		"budget.max_tokens":      {Tokens: 1001},
		"budget.max_model_calls": {ModelCalls: 4},
		"budget.max_latency":     {Latency: 3 * time.Second},
		"budget.max_cost_usd":    {CostUSD: 0.02},
	} {
		over := ok
		switch name {
		case "budget.max_tokens":
			over.Tokens = o.Tokens
		case "budget.max_model_calls":
			over.ModelCalls = o.ModelCalls
		case "budget.max_latency":
			over.Latency = o.Latency
		default:
			over.CostUSD = o.CostUSD
		}
		r := eval.Score(c, over)
		if r.Pass || len(r.Failed()) != 1 || r.Failed()[0].Name != name {
			t.Errorf("over %s: %+v", name, r.Failed())
		}
	}
}

func TestPassK(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for _, tc := range []struct {
		n, c, k     int
		atK, allOfK float64
	}{
		{10, 3, 1, 0.3, 0.3},
		{10, 3, 2, 1 - 21.0/45, 3.0 / 45},
		{10, 0, 3, 0, 0},
		{10, 10, 3, 1, 1},
		{10, 8, 3, 1, 56.0 / 120},
		{5, 2, 6, 0, 0},
		{200, 100, 50, 1 - 0.0, 0},
	} {
		if got := eval.PassAtK(tc.n, tc.c, tc.k); !near(got, tc.atK) && !(tc.n == 200 && got > 1-1e-12) {
			t.Errorf("pass@%d of %d/%d = %v, want %v", tc.k, tc.c, tc.n, got, tc.atK)
		}
		if got := eval.PassHatK(tc.n, tc.c, tc.k); !near(got, tc.allOfK) && !(tc.n == 200 && got < 1e-12) {
			t.Errorf("pass^%d of %d/%d = %v, want %v", tc.k, tc.c, tc.n, got, tc.allOfK)
		}
	}
}

func TestFromRunInfo(t *testing.T) {
	info := &agent.RunInfo{
		Output:    json.RawMessage(`"The result is 5"`),
		ToolCalls: []agent.ToolCallRecord{{Name: "add", Arguments: `{"a":2,"b":3}`}},
		Usage:     model.Usage{Requests: 2, InputTokens: 100, OutputTokens: 20},
		Cost:      model.Cost{USD: 0.001},
	}
	o := eval.FromRunInfo(info, time.Second)
	if o.Output != "The result is 5" || o.Tokens != 120 || o.ModelCalls != 2 || o.CostUSD != 0.001 || len(o.ToolCalls) != 1 || o.ToolCalls[0].Tool != "add" {
		t.Fatalf("%+v", o)
	}
	info.Output = json.RawMessage(`{"total":5}`)
	if o := eval.FromRunInfo(info, 0); o.Output != `{"total":5}` {
		t.Errorf("a structured output: %q", o.Output)
	}
}

// The set shown in docs/evaluation.md loads.
func TestDocsSet(t *testing.T) {
	doc, err := os.ReadFile("../docs/evaluation.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no YAML block in docs/evaluation.md")
	}
	s, err := eval.ParseYAML([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 2 || s.Cases[0].Trajectory.Calls[1].ArgsMatch != "subset" || s.Cases[1].Expect.Fields["items.0.name"] != "pen" {
		t.Errorf("%+v", s)
	}
}
