package agent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// readmeTypedAgent is the README's "typed agent with a typed tool", line for
// line (TestREADMETypedAgentCompiles): that it builds here is what says
// the README's code compiles. It needs a model, so no test calls it.
func readmeTypedAgent(ctx context.Context) {
	type operands struct {
		A float64 `json:"a" jsonschema:"the first operand"`
		B float64 `json:"b" jsonschema:"the second operand"`
	}

	add := tool.Must(tool.New("add", "Add two numbers.", func(ctx context.Context, in operands) (float64, error) {
		return in.A + in.B, nil
	}))

	m, _ := openai.FromEnv("gpt-4o-mini") // OPENAI_API_KEY or OPENAI_BASE_URL
	calc := agent.Must(agent.New("calculator", m, &agent.Options{
		Instructions: "Use the tools for every operation.",
		Tools:        []tool.Tool{add},
	}))

	b := memory.New(nil)                 // the in-process broker
	st, _ := sqlite.Open("calf.db", nil) // durable state
	rt := agent.NewRuntime(calf.NewClient(b, nil), st, nil)

	calc.Serve(ctx, rt, nil) // subscribe the agent's handlers
	out, err := calc.Run(ctx, rt, "What is 2 + 3?", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%d tokens, %d tool calls)\n", out.Output, out.Usage.TotalTokens, len(out.ToolCalls))
}

var _ = readmeTypedAgent

// readmeDeps is the README's example of dependencies, line for line
// (TestREADMEDepsExample), run on a scripted model.
func readmeDeps(ctx context.Context, m model.Model) (*agent.Output[string], error) {
	type Shop struct{ Currency string }
	var shop agent.Deps[Shop] // the one place that names the type

	price := tool.Must(tool.New("price", "Price an item.", func(ctx context.Context, in struct{ Item string }) (string, error) {
		s, err := shop.Of(ctx) // the run's dependencies, decoded
		return "12 " + s.Currency, err
	}))
	seller := agent.Must(agent.New("seller", m, &agent.Options{Tools: []tool.Tool{price}}))
	out, err := seller.Run(ctx, local.Runtime(), "What does a mug cost?", &agent.RunOptions{Deps: shop.Value(Shop{Currency: "EUR"})})
	return out, err
}
