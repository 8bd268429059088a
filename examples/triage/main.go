// Command triage is a small customer-service swarm: a triage agent reads
// the customer's message and hands the conversation off to a sales agent
// (prices, with a quote tool) or a support agent (orders, with an order
// lookup tool). The support agent can hand the conversation back to
// triage. It prints each handoff and tool call as it happens.
//
//	OPENAI_API_KEY=... go run ./examples/triage "How much would 12 seats cost?"
//	OPENAI_API_KEY=... go run ./examples/triage "Where is my order A-1001?"
//
// Any OpenAI-compatible server works: set OPENAI_BASE_URL (for example
// http://127.0.0.1:11434/v1 for Ollama) and pass -model.
//
// Other providers by name: -model anthropic:claude-haiku-4-5 (with
// ANTHROPIC_API_KEY), -model gemini:gemini-2.5-flash (GEMINI_API_KEY),
// -model ollama:llama3.2 (a local Ollama).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func main() {
	excli.Main("triage", "How much would 12 seats cost?", func(ctx context.Context, m model.Model, q string) (string, error) {
		return run(ctx, m, q, os.Stdout)
	})
}

type quoteArgs struct {
	Seats int `json:"seats" jsonschema:"how many seats the customer wants"`
}

type orderArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, such as A-1001"`
}

// orders is the support agent's (tiny) order database.
var orders = map[string]string{
	"A-1001": "shipped on 18 November, arriving on 22 November",
	"A-1002": "waiting for payment",
}

// agents builds the swarm: triage hands off to sales or support, and
// support back to triage. Every agent uses m.
func agents(m model.Model) (triage *agent.Agent[string], all []*agent.Agent[string], err error) {
	quote := tool.Must(tool.New("quote", "Price of a yearly subscription for a number of seats, in euros.", func(_ context.Context, in quoteArgs) (string, error) {
		if in.Seats <= 0 {
			return "", errors.New("seats must be positive")
		}
		per := 120
		if in.Seats >= 10 {
			per = 100 // volume discount
		}
		return fmt.Sprintf("%d seats at %d EUR = %d EUR per year", in.Seats, per, in.Seats*per), nil
	}))
	lookup := tool.Must(tool.New("lookup_order", "Status of an order.", func(_ context.Context, in orderArgs) (string, error) {
		if s, ok := orders[in.OrderID]; ok {
			return s, nil
		}
		return "", fmt.Errorf("no order %q", in.OrderID)
	}))
	sales, err := agent.New("sales", m, &agent.Options{
		Description:  "Sales: prices, quotes and subscriptions.",
		Instructions: "You are the sales agent. Quote prices with the quote tool, then answer in one or two sentences.",
		Tools:        []tool.Tool{quote},
	})
	if err != nil {
		return nil, nil, err
	}
	support, err := agent.New("support", m, &agent.Options{
		Description:  "Support: orders, deliveries and problems with the product.",
		Instructions: "You are the support agent. Look orders up with lookup_order, then answer in one or two sentences. If the customer asks about prices, transfer to triage.",
		Tools:        []tool.Tool{lookup},
	})
	if err != nil {
		return nil, nil, err
	}
	triage, err = agent.New("triage", m, &agent.Options{
		Instructions: "You are the first contact of a software company. Do not answer questions yourself: " +
			"transfer the customer to sales (prices, quotes) or support (orders, deliveries, problems), " +
			"with a one-sentence context of what they want.",
	})
	if err != nil {
		return nil, nil, err
	}
	// The specialists see the customer's words and triage's context, not
	// triage's tool calls.
	filtered := &agent.HandoffOptions{TextOnly: true}
	for _, h := range []struct {
		from *agent.Agent[string]
		to   agent.Target
		opts *agent.HandoffOptions
	}{{triage, sales, filtered}, {triage, support, filtered}, {support, triage, nil}} {
		t, err := agent.Handoff(h.to, h.opts)
		if err != nil {
			return nil, nil, err
		}
		if err := h.from.AddTool(t); err != nil {
			return nil, nil, err
		}
	}
	return triage, []*agent.Agent[string]{triage, sales, support}, nil
}

// run answers question with the swarm on the in-process broker, writing
// handoffs and tool calls to w as they happen.
func run(ctx context.Context, m model.Model, question string, w io.Writer) (string, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	triage, all, err := agents(m)
	if err != nil {
		return "", err
	}
	for _, a := range all {
		if err := a.Serve(ctx, rt, nil); err != nil {
			return "", err
		}
	}
	var answer string
	for ev, err := range triage.RunStream(ctx, rt, question, nil) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case agent.EventToolCall:
			fmt.Fprintf(w, "[%s] -> %s(%s)\n", ev.Agent, ev.ToolCall.ToolName, ev.ToolCall.Arguments)
		case agent.EventToolResult:
			fmt.Fprintf(w, "[%s] <- %s\n", ev.Agent, ev.ToolResult.Result.Text())
		case agent.EventHandoff:
			fmt.Fprintf(w, "[%s] handed off to %s\n", ev.Agent, ev.Output.Handoff.Agent)
		case agent.EventOutput:
			out, err := triage.Wait(ctx, rt, ev.RunID)
			if err != nil {
				return "", err
			}
			answer = fmt.Sprintf("[%s] %s", ev.Agent, out.Output)
		}
	}
	return answer, nil
}
