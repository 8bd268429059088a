// Command calculator is a tool-using agent: it answers arithmetic questions
// by calling typed add and multiply tools, and prints each tool call as it
// happens.
//
//	OPENAI_API_KEY=... go run ./examples/calculator "What is (2 + 3) * 7?"
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
	"github.com/calf-go/calf/tool"
)

type operands struct {
	A float64 `json:"a" jsonschema:"the first operand"`
	B float64 `json:"b" jsonschema:"the second operand"`
}

func main() {
	excli.Main("calculator", "What is (2 + 3) * 7?", func(ctx context.Context, m model.Model, q string) (string, error) {
		return run(ctx, m, q, os.Stdout)
	})
}

// run answers question with an agent on the in-process broker, writing
// tool calls and results to w as they happen.
func run(ctx context.Context, m model.Model, question string, w io.Writer) (string, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	add := tool.Must(tool.New("add", "Add two numbers.", func(_ context.Context, in operands) (float64, error) {
		return in.A + in.B, nil
	}))
	multiply := tool.Must(tool.New("multiply", "Multiply two numbers.", func(_ context.Context, in operands) (float64, error) {
		return in.A * in.B, nil
	}))
	calc, err := agent.New("calculator", m, &agent.Options{
		Instructions: "You are a calculator. Use the tools for every operation, then answer in one sentence.",
		Tools:        []tool.Tool{add, multiply},
	})
	if err != nil {
		return "", err
	}
	if err := calc.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	var answer string
	for ev, err := range calc.RunStream(ctx, rt, question, nil) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case agent.EventToolCall:
			fmt.Fprintf(w, "-> %s(%s)\n", ev.ToolCall.ToolName, ev.ToolCall.Arguments)
		case agent.EventToolResult:
			fmt.Fprintf(w, "<- %s\n", ev.ToolResult.Result.Text())
		case agent.EventOutput:
			out, err := calc.Wait(ctx, rt, ev.RunID)
			if err != nil {
				return "", err
			}
			answer = out.Output
		}
	}
	return answer, nil
}
