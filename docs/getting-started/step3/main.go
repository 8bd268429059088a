// Step 3 of docs/getting-started.md: several agents, a handoff and a
// subagent.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step3
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
		log.Fatal(err)
	}
	if err := run(context.Background(), m, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, m model.Model, w io.Writer) error {
	// A subagent: the travel agent calls it as a tool, with its own run.
	translator, err := agent.New("translator", m, &agent.Options{
		Description:  "Translates a phrase into the language it is asked for.",
		Instructions: "Translate what you are given. Answer with the translation only.",
	})
	if err != nil {
		return err
	}
	travel, err := agent.New("travel", m, &agent.Options{
		Description:  "Travel advice: places, transport, phrases to know.",
		Instructions: "You help travellers. Use the translator for phrases in other languages.",
	})
	if err != nil {
		return err
	}
	if err := travel.AddSubagent(translator, nil); err != nil {
		return err
	}
	// A handoff: the front desk gives the conversation to the travel agent,
	// which answers the caller in its place.
	toTravel, err := agent.Handoff(travel, nil) // the tool transfer_to_travel
	if err != nil {
		return err
	}
	desk, err := agent.NewText("desk", m, "Do not answer yourself: transfer the customer to the right agent.", toTravel)
	if err != nil {
		return err
	}

	// The runtime serves desk on its first run, and with it the agents desk
	// may hand off to, and their subagents.
	out, err := desk.Run(ctx, local.Runtime(), "I am off to Rome. How do I say thank you?", nil)
	if err != nil {
		return err
	}
	for _, hop := range out.Chain {
		fmt.Fprintf(w, "%s handed off\n", hop.Agent)
	}
	fmt.Fprintf(w, "[%s] %s\n", out.Agent, out.Output)
	return nil
}
