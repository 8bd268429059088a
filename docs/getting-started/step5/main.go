// Step 5 of docs/getting-started.md: a workflow.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/workflow"
)

func main() {
	spec := flag.String("model", "openai:gpt-4o-mini", "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME or URL#NAME")
	flag.Parse()
	m, err := models.Open(*spec, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(context.Background(), m, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// Ticket is the workflow's state: each node reads it and returns it
// changed, and it is checkpointed after every node.
type Ticket struct {
	Message  string `json:"message"`
	Category string `json:"category"`
	Reply    string `json:"reply"`
}

// label is the classifier's structured output.
type label struct {
	Category string `json:"category" enum:"refund,question"`
}

func run(ctx context.Context, m model.Model, w io.Writer) error {
	classifier, err := agent.NewTyped[label]("classifier", m, &agent.Options{
		Instructions: "Classify the customer's message: a refund request or a question.",
	})
	if err != nil {
		return err
	}
	helper, err := agent.NewText("helper", m, "Answer the customer's question in two sentences.")
	if err != nil {
		return err
	}
	wf, err := workflow.New[Ticket]("tickets", nil).
		Node("classify", workflow.AgentNode(classifier,
			func(t Ticket) (string, error) { return t.Message, nil },
			func(t Ticket, l label) (Ticket, error) { t.Category = l.Category; return t, nil })).
		Node("refund", workflow.Func(func(ctx context.Context, t Ticket) (Ticket, error) {
			t.Reply = "Your refund is on its way." // a function node: plain Go, no model
			return t, nil
		})).
		Node("answer", workflow.AgentNode(helper,
			func(t Ticket) (string, error) { return t.Message, nil },
			func(t Ticket, reply string) (Ticket, error) { t.Reply = reply; return t, nil })).
		Edge(workflow.Start, "classify").
		Route("classify", func(t Ticket) string {
			if t.Category == "refund" {
				return "refund"
			}
			return "answer"
		}, "refund", "answer").
		Edge("refund", workflow.End).
		Edge("answer", workflow.End).
		Build()
	if err != nil {
		return err
	}
	final, err := wf.Run(ctx, local.Runtime(), Ticket{Message: "My mug arrived broken, I want my money back."}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s\n", final.Category, final.Reply)
	return nil
}
