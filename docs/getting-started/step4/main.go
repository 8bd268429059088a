// Step 4 of docs/getting-started.md: a team.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step4
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
	"github.com/calf-go/calf/team"
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

func run(ctx context.Context, m model.Model, w io.Writer) error {
	researcher, err := agent.NewText("researcher", m, "List the three facts that matter most about the topic, one a line.")
	if err != nil {
		return err
	}
	writer, err := agent.NewText("writer", m, "Write one short paragraph from the facts you are given.")
	if err != nil {
		return err
	}
	// Each member's output is the next one's input; the last one's output
	// is the team's.
	content, err := team.NewSequential("content", []team.Member{
		team.AgentMember(researcher),
		team.AgentMember(writer),
	}, nil)
	if err != nil {
		return err
	}
	out, err := content.Run(ctx, local.Runtime(), "Why do bees dance?", nil)
	if err != nil {
		return err
	}
	for _, turn := range out.Transcript {
		fmt.Fprintf(w, "step %d: %s\n", turn.Step, turn.Member)
	}
	fmt.Fprintln(w, out.Output)
	return nil
}
