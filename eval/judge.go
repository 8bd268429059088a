package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf/model"
)

// A Judge decides whether an answer meets a case's rubrics.
type Judge interface {
	// Judge returns a verdict for each of c's rubrics, in their order, on
	// the answer to c's input.
	Judge(ctx context.Context, c *Case, answer string) ([]Verdict, error)
}

// Verdict is a judge's decision on one rubric, with its reasoning.
type Verdict struct {
	Rubric string `json:"rubric"`
	Pass   bool   `json:"pass"`
	Reason string `json:"reason"`
}

// ModelJudge returns a judge that asks m, any model (open one by name
// with package model/models), for a verdict on each rubric, as JSON
// following a schema.
func ModelJudge(m model.Model) Judge { return modelJudge{m} }

type modelJudge struct{ m model.Model }

// judgeInstructions is the system prompt of a model judge.
const judgeInstructions = `You grade the answer of an AI agent against rubrics. For each rubric, in the order given, decide strictly whether the answer meets it, and say why in one sentence. Judge only the answer given, not what it could have said. Reply with JSON: {"verdicts": [{"rubric": "...", "pass": true, "reason": "..."}]}, one verdict per rubric.`

var verdictSchema = json.RawMessage(`{"type":"object","properties":{"verdicts":{"type":"array","items":{"type":"object","properties":{"rubric":{"type":"string"},"pass":{"type":"boolean"},"reason":{"type":"string"}},"required":["rubric","pass","reason"],"additionalProperties":false}}},"required":["verdicts"],"additionalProperties":false}`)

func (j modelJudge) Judge(ctx context.Context, c *Case, answer string) ([]Verdict, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "The user asked:\n%s\n\nThe agent answered:\n%s\n\nRubrics:\n", c.Input, answer)
	for i, r := range c.Rubrics {
		fmt.Fprintf(&b, "%d. %s\n", i+1, r)
	}
	resp, err := j.m.Generate(ctx, &model.Request{
		Messages: []model.Message{model.SystemMessage(judgeInstructions), model.UserMessage(b.String())},
		Output:   &model.OutputSchema{Name: "verdicts", Schema: verdictSchema, Strict: true},
	})
	if err != nil {
		return nil, fmt.Errorf("eval: judge %s: %w", j.m.Name(), err)
	}
	var out struct {
		Verdicts []Verdict `json:"verdicts"`
	}
	text := resp.Message.Text()
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("eval: judge %s: its reply is not the JSON asked for: %q", j.m.Name(), clip(text))
	}
	if len(out.Verdicts) != len(c.Rubrics) {
		return nil, fmt.Errorf("eval: judge %s: %d verdicts for %d rubrics", j.m.Name(), len(out.Verdicts), len(c.Rubrics))
	}
	for i := range out.Verdicts {
		out.Verdicts[i].Rubric = c.Rubrics[i]
	}
	return out.Verdicts, nil
}

// judge adds to r a check per rubric of c, as j decides on answer; a
// judge that fails fails the rubrics, saying why.
func judge(ctx context.Context, j Judge, c *Case, answer string, r *Result) []Verdict {
	if len(c.Rubrics) == 0 {
		return nil
	}
	var vs []Verdict
	var err error
	if j == nil {
		err = errors.New("no judge was given (RunOptions.Judge)")
	} else {
		vs, err = j.Judge(ctx, c, answer)
	}
	if err != nil {
		for _, rub := range c.Rubrics {
			r.Checks = append(r.Checks, Check{Name: "rubric", Detail: fmt.Sprintf("%q not judged: %v", rub, err)})
		}
		r.Pass = false
		return nil
	}
	for _, v := range vs {
		ch := Check{Name: "rubric", Pass: v.Pass}
		if !v.Pass {
			ch.Detail = fmt.Sprintf("%q: %s", v.Rubric, v.Reason)
		}
		r.Checks = append(r.Checks, ch)
		r.Pass = r.Pass && v.Pass
	}
	return vs
}
