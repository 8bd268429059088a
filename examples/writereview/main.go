// Command writereview is a write/review loop as a workflow: a writer agent
// drafts, a reviewer agent reviews, and the draft goes back to the writer
// with the feedback until the reviewer approves or the rounds run out.
// Every step is an event; the state is checkpointed after each one.
//
//	OPENAI_API_KEY=... go run ./examples/writereview "a haiku about event-driven agents"
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
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/workflow"
)

// Review is the workflow's state.
type Review struct {
	Topic    string `json:"topic"`
	Draft    string `json:"draft"`
	Feedback string `json:"feedback,omitempty"`
	Approved bool   `json:"approved"`
	Rounds   int    `json:"rounds"`
}

func main() {
	rounds := flag.Int("rounds", 3, "review rounds at most")
	excli.Main("writereview", "a haiku about event-driven agents", func(ctx context.Context, m model.Model, topic string) (string, error) {
		final, err := run(ctx, m, m, topic, *rounds, os.Stdout)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("\n%s\n(approved: %v after %d rounds)", final.Draft, final.Approved, final.Rounds), nil
	})
}

// newWorkflow is the seed's review cycle: write, review, and again until
// approved or maxRounds reviews.
func newWorkflow(writer, reviewer *agent.Agent[string], maxRounds int) (*workflow.Workflow[Review], error) {
	return workflow.New[Review]("review_cycle", nil).
		Node("write", workflow.AgentNode(writer,
			func(s Review) (string, error) {
				return fmt.Sprintf("Write: %s\nPrevious draft: %s\nFeedback: %s", s.Topic, s.Draft, s.Feedback), nil
			},
			func(s Review, out string) (Review, error) { s.Draft = out; return s, nil })).
		Node("review", workflow.AgentNode(reviewer,
			func(s Review) (string, error) { return "Review: " + s.Draft, nil },
			func(s Review, out string) (Review, error) {
				s.Feedback, s.Approved, s.Rounds = out, strings.Contains(strings.ToUpper(out), "APPROVED"), s.Rounds+1
				return s, nil
			})).
		Edge(workflow.Start, "write").
		Edge("write", "review").
		Route("review", func(s Review) string {
			if s.Approved || s.Rounds >= maxRounds {
				return workflow.End
			}
			return "write"
		}, "write", workflow.End).
		Build()
}

// run drafts and reviews topic on the in-process broker, writing each
// completed step to w as it happens.
func run(ctx context.Context, writerModel, reviewerModel model.Model, topic string, maxRounds int, w io.Writer) (Review, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	writer, err := agent.New("writer", writerModel, &agent.Options{
		Instructions: "You are a writer. Write what you are asked; when given feedback on a previous draft, revise it. Answer with the text only.",
	})
	if err != nil {
		return Review{}, err
	}
	reviewer, err := agent.New("reviewer", reviewerModel, &agent.Options{
		Instructions: "You are a demanding editor. Review the text in two sentences. If it needs no more work, start your answer with APPROVED.",
	})
	if err != nil {
		return Review{}, err
	}
	wf, err := newWorkflow(writer, reviewer, maxRounds)
	if err != nil {
		return Review{}, err
	}
	for _, serve := range []func() error{
		func() error { return writer.Serve(ctx, rt, nil) },
		func() error { return reviewer.Serve(ctx, rt, nil) },
		func() error { return wf.Serve(ctx, rt, nil) },
	} {
		if err := serve(); err != nil {
			return Review{}, err
		}
	}
	var final Review
	for ev, err := range wf.RunStream(ctx, rt, Review{Topic: topic}, nil) {
		if err != nil {
			return Review{}, err
		}
		switch ev.Kind {
		case workflow.EventNodeDone:
			fmt.Fprintf(w, "step %d: %s done, next %s\n", ev.Step, ev.Node, strings.Join(ev.NodeDone.Next, ", "))
		case workflow.EventOutput:
			final, err = wf.DecodeOutput(ev.Output)
			if err != nil {
				return Review{}, err
			}
		}
	}
	return final, nil
}
