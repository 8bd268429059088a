// Step 1 of docs/getting-started.md: the first agent.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step1
//	go run ./docs/getting-started/step1 -model 'http://127.0.0.1:11434/v1#llama3.2'
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
)

func main() {
	spec := flag.String("model", "openai:gpt-4o-mini", "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME or URL#NAME")
	flag.Parse()
	m, err := models.Open(*spec, nil)
	if err != nil {
		log.Fatal(err) // names the variable to set, such as OPENAI_API_KEY
	}
	if err := run(context.Background(), m, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, m model.Model, w io.Writer) error {
	a, err := agent.NewText("geographer", m, "Answer briefly.")
	if err != nil {
		return err
	}
	out, err := a.Run(ctx, local.Runtime(), "What is the capital of France?", nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, out.Output)
	return nil
}
