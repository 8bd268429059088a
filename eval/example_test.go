package eval_test

import (
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/eval"
)

// A case from a YAML set, scored against what a run did.
func ExampleScore() {
	set, err := eval.ParseYAML([]byte(`
name: calculator
cases:
  - id: add
    input: What is 2 + 3?
    expect: {contains: ["5"]}
    trajectory:
      calls: [{tool: add, args: {a: 2, b: 3}}]
    budget: {max_model_calls: 2}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	run := eval.Observed{
		Output:     "The result is 6.",
		ToolCalls:  []eval.Call{{Tool: "add", Args: json.RawMessage(`{"a":2,"b":4}`)}},
		ModelCalls: 2,
	}
	r := eval.Score(&set.Cases[0], run)
	fmt.Println("pass:", r.Pass)
	for _, c := range r.Failed() {
		fmt.Printf("%s: %s\n", c.Name, c.Detail)
	}
	// Output:
	// pass: false
	// answer.contains: the answer does not contain "5": "The result is 6."
	// trajectory: calls made: add{"a":2,"b":4}; expected (exact): add{"a":2,"b":3}
}
