// Command mcpfiles gives an agent the tools of the reference MCP
// filesystem server, confined to one directory: the agent lists, reads
// and writes files there through the server's tools, each call an event
// on the agent's channels like any tool's.
//
//	npm install @modelcontextprotocol/server-filesystem
//	OPENAI_API_KEY=... go run ./examples/mcpfiles -dir ./notes "Summarize the notes in one new file, summary.md"
//
// -server is the command that starts the server (default: npx
// @modelcontextprotocol/server-filesystem); the directory is appended to
// it. Any OpenAI-compatible server works: set OPENAI_BASE_URL and pass
// -model.
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
	"path/filepath"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func main() {
	dir := flag.String("dir", ".", "the directory the server gives access to")
	server := flag.String("server", "npx -y @modelcontextprotocol/server-filesystem", "the command that starts the filesystem server, split at white space")
	excli.Main("mcpfiles", "List the files here and say what they are.", func(ctx context.Context, m model.Model, task string) (string, error) {
		return run(ctx, m, strings.Fields(*server), *dir, task, os.Stdout)
	})
}

// run carries out task with the tools of the filesystem server that
// command starts on dir, writing the calls and results to out.
func run(ctx context.Context, m model.Model, command []string, dir, task string, out io.Writer) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fs, err := mcp.New(mcp.Config{Name: "fs", Command: command[0], Args: append(command[1:], dir)})
	if err != nil {
		return "", err
	}
	defer fs.Close()
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)
	a, err := agent.New("files", m, &agent.Options{
		Instructions: "You work on the files of " + dir + " with the fs tools. Use absolute paths under it. " +
			"Finish with a short account of what you did.",
		Toolsets: []tool.Toolset{fs},
	})
	if err != nil {
		return "", err
	}
	if err := a.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	var answer string
	for ev, err := range a.RunStream(ctx, rt, task, nil) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case agent.EventToolCall:
			fmt.Fprintf(out, "-> %s %s\n", ev.ToolCall.ToolName, ev.ToolCall.Arguments)
		case agent.EventToolResult:
			first, _, _ := strings.Cut(ev.ToolResult.Result.Text(), "\n")
			fmt.Fprintf(out, "<- %s\n", first)
		case agent.EventOutput:
			res, err := a.DecodeOutput(ev.Output)
			if err != nil {
				return "", err
			}
			answer = res
		}
	}
	return answer, nil
}
