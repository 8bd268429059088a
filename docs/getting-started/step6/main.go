// Step 6 of docs/getting-started.md: a tool call that waits for a
// person's approval.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step6
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/tool"
)

func main() {
	spec := flag.String("model", "openai:gpt-4o-mini", "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME or URL#NAME")
	flag.Parse()
	m, err := models.Open(*spec, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(context.Background(), m, os.Stdin, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

type refundArgs struct {
	Order  string  `json:"order" jsonschema:"the order's id"`
	Amount float64 `json:"amount" jsonschema:"the amount to refund, in euros"`
}

var refund = tool.Must(tool.New("refund", "Refund an order.",
	func(ctx context.Context, in refundArgs) (string, error) {
		return fmt.Sprintf("refunded %.2f EUR on order %s", in.Amount, in.Order), nil
	}))

func run(ctx context.Context, m model.Model, in io.Reader, w io.Writer) error {
	clerk, err := agent.New("clerk", m, &agent.Options{
		Instructions: "Refund orders with the refund tool when asked. Answer in one sentence.",
		Tools:        []tool.Tool{refund},
		// Every call of a tool waits for a person's answer.
		Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
	})
	if err != nil {
		return err
	}
	rt := local.Runtime()
	answers := bufio.NewScanner(in)
	for ev, err := range clerk.RunStream(ctx, rt, "Refund 30 euros on order A-17.", nil) {
		if err != nil {
			return err
		}
		switch {
		case ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending:
			fmt.Fprintf(w, "%s %s? [y/N] ", ev.Approval.ToolName, ev.Approval.Arguments)
			answers.Scan()
			yes := strings.EqualFold(strings.TrimSpace(answers.Text()), "y")
			ans := approval.Answer{Approve: yes, Digest: ev.Approval.Digest}
			if !yes {
				ans.Message = "The person in charge refused the refund."
			}
			if _, err := rt.Respond(ctx, ev.Approval.ID, ans); err != nil {
				return err
			}
		case ev.Kind == agent.EventToolResult:
			fmt.Fprintf(w, "<- %s\n", ev.ToolResult.Result.Text())
		case ev.Kind == agent.EventOutput:
			text, err := clerk.DecodeOutput(ev.Output)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, text)
		}
	}
	return nil
}
