package eval_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
)

const rubricSet = `
cases:
  - id: add
    input: What is 2 + 3?
    rubrics: [The answer gives the sum of 2 and 3., The answer is one sentence.]
`

// scriptedJudge passes the first rubric when the answer holds "5", and
// the second always; garbage makes it reply with text that is not JSON.
func scriptedJudge(garbage bool, asked *atomic.Int64) model.Model {
	return modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		asked.Add(1)
		if garbage {
			return modeltest.Text("Looks good to me!"), nil
		}
		if req.Output == nil || req.Output.Name != "verdicts" {
			return modeltest.Text("no schema asked"), nil
		}
		prompt := req.Messages[len(req.Messages)-1].Text()
		_, answer, _ := strings.Cut(prompt, "The agent answered:\n")
		sum := `{"rubric":"1","pass":false,"reason":"the sum is not 5"}`
		if strings.Contains(answer, "5") {
			sum = `{"rubric":"1","pass":true,"reason":"it says 5"}`
		}
		return modeltest.Text(`{"verdicts":[` + sum + `,{"rubric":"2","pass":true,"reason":"one sentence"}]}`), nil
	})
}

func TestJudge(t *testing.T) {
	set := mustSet(t, rubricSet)
	var asked atomic.Int64
	good, _ := calculator(t, false)
	rep, err := eval.Run(t.Context(), local.New(nil), runner.Agent(good), set, &eval.RunOptions{Judge: eval.ModelJudge(scriptedJudge(false, &asked))})
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Cases[0].Runs[0]
	if !run.Result.Pass || len(run.Verdicts) != 2 || run.Verdicts[0].Rubric != set.Cases[0].Rubrics[0] || run.Verdicts[0].Reason != "it says 5" || asked.Load() != 1 {
		t.Fatalf("judged: %+v", run)
	}

	broken, _ := calculator(t, true)
	rep, err = eval.Run(t.Context(), local.New(nil), runner.Agent(broken), set, &eval.RunOptions{Judge: eval.ModelJudge(scriptedJudge(false, &asked))})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Cases[0].Runs[0].Result.Failed(); rep.Passed() != 0 || len(f) != 1 || f[0].Name != "rubric" || !strings.Contains(f[0].Detail, "the sum is not 5") {
		t.Fatalf("a wrong answer judged: %+v", f)
	}

	for name, j := range map[string]eval.Judge{"no judge": nil, "not the JSON asked for": eval.ModelJudge(scriptedJudge(true, &asked))} {
		rep, err = eval.Run(t.Context(), local.New(nil), runner.Agent(good), set, &eval.RunOptions{Judge: j})
		if err != nil {
			t.Fatal(err)
		}
		f := rep.Cases[0].Runs[0].Result.Failed()
		if rep.Passed() != 0 || len(f) != 2 || !strings.Contains(f[0].Detail, strings.TrimPrefix(name, "no judge")) || !strings.Contains(f[0].Detail, "not judged") {
			t.Errorf("%s: %+v", name, f)
		}
	}
}
