// Command research answers a question with a hierarchical team: a lead
// agent delegates to a searcher (which looks facts up in a small library
// with a search tool) and to an analyst (which weighs them), by calling
// them as tools, then writes the report. Each delegation is printed as it
// happens.
//
//	OPENAI_API_KEY=... go run ./examples/research "Why do cats purr?"
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
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

func main() {
	excli.Main("research", "Why do cats purr?", func(ctx context.Context, m model.Model, q string) (string, error) {
		return run(ctx, m, q, os.Stderr)
	})
}

// library is what the searcher's tool searches: a stand-in for a search
// engine, so that the example runs anywhere.
var library = []string{
	"Cats purr at a frequency of 25 to 150 Hz, produced by the laryngeal muscles twitching as the cat breathes in and out.",
	"Cats purr when content, but also when stressed, injured or giving birth.",
	"Some studies suggest that purring frequencies promote bone healing and tissue repair.",
	"Kittens purr from a few days old, which may help their mother find and feed them.",
	"Big cats such as lions and tigers cannot purr continuously; they roar instead.",
	"Octopuses have three hearts and blue blood.",
	"Honey found in ancient Egyptian tombs was still edible.",
}

type searchArgs struct {
	Query string `json:"query" jsonschema:"words to look for"`
}

// search returns the library entries that share a word of four letters or
// more with the query.
func search(_ context.Context, in searchArgs) ([]string, error) {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(in.Query)) {
		if w = strings.Trim(w, "?.,!"); len(w) >= 4 {
			words = append(words, strings.TrimSuffix(w, "s"))
		}
	}
	var hits []string
	for _, entry := range library {
		e := strings.ToLower(entry)
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(e, w) }) {
			hits = append(hits, entry)
		}
	}
	if len(hits) == 0 {
		return []string{"nothing found"}, nil
	}
	return hits, nil
}

// Instructions of the team's agents.
const (
	leadInstructions = "You lead a research team. To answer the question, first ask the searcher for the facts, " +
		"then ask the analyst to assess them, then write a short report (at most 120 words) that answers the question."
	searcherInstructions = "You find facts. Use the search tool (several times if needed) and reply with the relevant facts found, one per line."
	analystInstructions  = "You are an analyst. Say which of the facts you are given are well established and which are uncertain, in a few sentences."
)

// run answers question with the research team on the in-process broker,
// logging each delegation to w as it happens.
func run(ctx context.Context, m model.Model, question string, w io.Writer) (string, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	searcher, err := agent.New("searcher", m, &agent.Options{
		Description:  "Finds facts about a topic in the library.",
		Instructions: searcherInstructions,
		Tools:        []tool.Tool{tool.Must(tool.New("search", "Search the library.", search))},
	})
	if err != nil {
		return "", err
	}
	analyst, err := agent.New("analyst", m, &agent.Options{
		Description:  "Assesses how well established a set of facts is.",
		Instructions: analystInstructions,
	})
	if err != nil {
		return "", err
	}
	lead, err := agent.New("lead", m, &agent.Options{
		Description:  "Leads the research and writes the report.",
		Instructions: leadInstructions,
	})
	if err != nil {
		return "", err
	}
	// The lead calls its members as tools (agents as tools): each call is
	// a child run, and its answer comes back as the tool's result.
	for _, sub := range []*agent.Agent[string]{searcher, analyst} {
		if err := lead.AddSubagent(sub, nil); err != nil {
			return "", err
		}
	}
	for _, a := range []*agent.Agent[string]{searcher, analyst, lead} {
		if err := a.Serve(ctx, rt, nil); err != nil {
			return "", err
		}
	}
	research, err := team.NewHierarchical("research", team.AgentMember(lead),
		[]team.Member{team.AgentMember(searcher), team.AgentMember(analyst)},
		&team.Options{Description: "researches a question and reports"})
	if err != nil {
		return "", err
	}
	if err := research.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	var report string
	for ev, err := range research.RunStream(ctx, rt, question, nil) {
		if err != nil {
			return "", err
		}
		switch {
		case ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventToolCall:
			fmt.Fprintf(w, "%s -> %s %s\n", ev.Agent.Agent, ev.Agent.ToolCall.ToolName, ev.Agent.ToolCall.Arguments)
		case ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventOutput && ev.Agent.Agent != lead.Name():
			fmt.Fprintf(w, "%s answered (%d model calls)\n", ev.Agent.Agent, ev.Agent.Output.Steps)
		case ev.Kind == team.EventOutput:
			out, err := research.Wait(ctx, rt, ev.RunID)
			if err != nil {
				return "", err
			}
			report = out.Output
		}
	}
	return report, nil
}
