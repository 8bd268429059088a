// Step 2 of docs/getting-started.md: a typed tool.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step2
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
	"github.com/calf-go/calf/tool"
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

// convertArgs are the tool's arguments: their JSON Schema, sent to the
// model, comes from this type, and every call is checked against it.
type convertArgs struct {
	Amount float64 `json:"amount" jsonschema:"the amount to convert"`
	From   string  `json:"from" enum:"EUR,USD,GBP"`
	To     string  `json:"to" enum:"EUR,USD,GBP"`
}

// inEUR is what one unit of each currency is worth in euros.
var inEUR = map[string]float64{"EUR": 1, "USD": 0.9, "GBP": 1.2}

var convert = tool.Must(tool.New("convert", "Convert an amount between currencies.",
	func(ctx context.Context, in convertArgs) (string, error) {
		v := in.Amount * inEUR[in.From] / inEUR[in.To]
		return fmt.Sprintf("%.2f %s", v, in.To), nil
	}))

func run(ctx context.Context, m model.Model, w io.Writer) error {
	a, err := agent.New("cashier", m, &agent.Options{
		Instructions: "Convert currencies with the convert tool. Answer in one sentence.",
		Tools:        []tool.Tool{convert},
	})
	if err != nil {
		return err
	}
	for ev, err := range a.RunStream(ctx, local.Runtime(), "How much is 100 USD in GBP?", nil) {
		if err != nil {
			return err
		}
		switch ev.Kind {
		case agent.EventToolCall:
			fmt.Fprintf(w, "-> %s %s\n", ev.ToolCall.ToolName, ev.ToolCall.Arguments)
		case agent.EventToolResult:
			fmt.Fprintf(w, "<- %s\n", ev.ToolResult.Result.Text())
		case agent.EventOutput:
			text, err := a.DecodeOutput(ev.Output)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, text)
		}
	}
	return nil
}
