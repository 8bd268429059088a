package eval_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/runner"
)

func report(cases map[string][]bool) *eval.Report {
	rep := &eval.Report{Set: "s"}
	for _, id := range []string{"a", "b", "c", "d"} {
		runs, ok := cases[id]
		if !ok {
			continue
		}
		cr := eval.CaseReport{Case: id, Pass: true}
		for i, pass := range runs {
			cr.Runs = append(cr.Runs, eval.CaseRun{Case: id, N: i, Result: eval.Result{Pass: pass},
				Observed: eval.Observed{CostUSD: 0.01, Latency: time.Second, Tokens: 100}})
			if pass {
				cr.Passed++
			}
			cr.Pass = cr.Pass && pass
		}
		rep.Cases = append(rep.Cases, cr)
	}
	return rep
}

func TestCompare(t *testing.T) {
	base := report(map[string][]bool{"a": {true, true}, "b": {true, false}, "c": {false, false}})
	// A regression: a passes half as often.
	cmp := eval.Compare(base, report(map[string][]bool{"a": {true, false}, "b": {true, false}, "c": {false, false}}))
	if !cmp.Regressed() || cmp.Worse != 1 || cmp.Better != 0 || cmp.Cases[0].Change != eval.Worse || cmp.Cases[1].Change != eval.Same {
		t.Errorf("a regression: %+v", cmp)
	}
	// An improvement, a case added, one removed: no regression.
	cmp = eval.Compare(base, report(map[string][]bool{"a": {true, true}, "b": {true, true}, "d": {true}}))
	if cmp.Regressed() || cmp.Better != 1 {
		t.Errorf("an improvement: %+v", cmp)
	}
	changes := map[string]string{}
	for _, c := range cmp.Cases {
		changes[c.Case] = c.Change
	}
	if changes["b"] != eval.Better || changes["d"] != eval.Added || changes["c"] != eval.Gone || changes["a"] != eval.Same {
		t.Errorf("changes: %v", changes)
	}
}

// A stored baseline (the JSON of a real report) compared with a run of a
// broken agent: the regression is found, with the cost and latency
// deltas.
func TestCompareWithStoredBaseline(t *testing.T) {
	set := mustSet(t, calcSet)
	good, _ := calculator(t, false)
	rt := local.New(nil)
	rep, err := eval.Run(t.Context(), rt, runner.Agent(good), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored bytes.Buffer
	if err := json.NewEncoder(&stored).Encode(rep); err != nil {
		t.Fatal(err)
	}
	base, err := eval.ReadReport(&stored)
	if err != nil {
		t.Fatal(err)
	}
	broken, _ := calculator(t, true)
	cur, err := eval.Run(t.Context(), local.New(nil), runner.Agent(broken), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmp := eval.Compare(base, cur)
	if !cmp.Regressed() || cmp.Worse != 1 || cmp.Cases[0].Case != "add" || cmp.Cases[0].BeforePassRate != 1 || cmp.Cases[0].AfterPassRate != 0 {
		t.Fatalf("%+v", cmp)
	}
	if eval.Compare(cur, base).Regressed() {
		t.Error("the fix compared with the broken run regressed")
	}
}
