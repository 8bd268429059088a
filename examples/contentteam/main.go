// Command contentteam writes a short article with a sequential team: a
// researcher gathers facts, a writer drafts from them, and an editor
// polishes the draft. Each member's output is the next one's input, and
// each step is printed as it ends.
//
//	OPENAI_API_KEY=... go run ./examples/contentteam "why cats purr"
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

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
)

func main() {
	excli.Main("contentteam", "why cats purr", func(ctx context.Context, m model.Model, topic string) (string, error) {
		return run(ctx, m, topic, os.Stderr)
	})
}

// Instructions of the three members.
const (
	researcherInstructions = "You are a researcher. List five short, accurate facts about the topic you are given, one per line. Facts only."
	writerInstructions     = "You are a writer. Write a short article (at most 150 words) from the facts you are given. Plain text."
	editorInstructions     = "You are an editor. Correct and tighten the article you are given, and give it a title on its first line. Reply with the edited article only."
)

// run writes an article about topic with the team on the in-process
// broker, logging each member's step to w as it ends.
func run(ctx context.Context, m model.Model, topic string, w io.Writer) (string, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	var members []team.Member
	for _, spec := range []struct{ name, description, instructions string }{
		{"researcher", "gathers facts", researcherInstructions},
		{"writer", "drafts the article", writerInstructions},
		{"editor", "edits the article", editorInstructions},
	} {
		a, err := agent.New(spec.name, m, &agent.Options{
			Description: spec.description, Instructions: spec.instructions,
		})
		if err != nil {
			return "", err
		}
		if err := a.Serve(ctx, rt, nil); err != nil {
			return "", err
		}
		members = append(members, team.AgentMember(a))
	}
	content, err := team.NewSequential("content", members, &team.Options{Description: "researches, writes and edits an article"})
	if err != nil {
		return "", err
	}
	if err := content.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	var article string
	for ev, err := range content.RunStream(ctx, rt, topic, nil) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case team.EventMemberDone:
			fmt.Fprintf(w, "[step %d] %s done (%d tokens)\n", ev.Step, ev.Member, ev.Output.Usage.TotalTokens)
		case team.EventOutput:
			out, err := content.Wait(ctx, rt, ev.RunID)
			if err != nil {
				return "", err
			}
			article = out.Output
		}
	}
	return article, nil
}
