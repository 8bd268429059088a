// Command launcher shows a program's own agents, team and workflow
// offered on the command line, in a terminal chat, over HTTP with a web
// chat, and as a worker, by one line of main (package launcher):
//
//	OPENAI_API_KEY=... go run ./examples/launcher run "a haiku about rain"
//	go run ./examples/launcher run --agent review "a haiku about rain"
//	go run ./examples/launcher chat
//	go run ./examples/launcher serve        # http://127.0.0.1:8420/
//	go run ./examples/launcher worker --broker nats://127.0.0.1:4222 --store postgres://...
//
// Any OpenAI-compatible server works: set OPENAI_BASE_URL (for example
// http://127.0.0.1:11434/v1 for Ollama) and pass --model; other providers
// by name: --model anthropic:claude-haiku-4-5, --model gemini:gemini-2.5-flash.
package main

import (
	"context"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/launcher"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

func main() { launcher.Main(context.Background(), &launcher.Config{Name: "launcher", Model: runners}) }

// Instructions of the two agents.
const (
	writerInstructions = "You are a writer. Write what you are asked for, briefly. Plain text."
	editorInstructions = "You are an editor. Tighten the text you are given and reply with the edited text only."
)

// draft is the state of the shout workflow.
type draft struct{ Text string }

// runners returns the program's agents, team and workflow on m: the
// writer, the review team (the writer, then the editor), and the shout
// workflow, which needs no model.
func runners(m model.Model) ([]runner.Runner, error) {
	writer, err := agent.New("writer", m, &agent.Options{Description: "writes what it is asked for", Instructions: writerInstructions})
	if err != nil {
		return nil, err
	}
	editor, err := agent.New("editor", m, &agent.Options{Description: "edits a text", Instructions: editorInstructions})
	if err != nil {
		return nil, err
	}
	review, err := team.NewSequential("review", []team.Member{team.AgentMember(writer), team.AgentMember(editor)},
		&team.Options{Description: "writes, then edits"})
	if err != nil {
		return nil, err
	}
	shout, err := workflow.New[draft]("shout", nil).
		Node("upper", workflow.Func(func(_ context.Context, d draft) (draft, error) {
			d.Text = strings.ToUpper(d.Text) + "!"
			return d, nil
		})).
		Edge(workflow.Start, "upper").Edge("upper", workflow.End).Build()
	if err != nil {
		return nil, err
	}
	return []runner.Runner{
		runner.Agent(writer),
		runner.Team(review),
		runner.Workflow(shout, "shouts the text back",
			func(prompt string) (draft, error) { return draft{Text: prompt}, nil },
			func(d draft) (string, error) { return d.Text, nil }),
	}, nil
}
