// Command coder is a coding assistant that works on the files of one
// directory: it reads and edits them on its own (permission mode
// accept_edits), and asks before it runs a command, printing the command
// and waiting for y (run it), n (refuse it) or an edited command.
//
//	OPENAI_API_KEY=... go run ./examples/coder -dir ./myproject "Add a test for Sum and run it"
//
// Commands run in a sandbox where bubblewrap is installed (no network, of
// the file system only -dir and the system's programs, read-only); without
// it the prompt says they are
// not sandboxed. Any OpenAI-compatible server works: set OPENAI_BASE_URL
// and pass -model.
//
// Other providers by name: -model anthropic:claude-haiku-4-5 (with
// ANTHROPIC_API_KEY), -model gemini:gemini-2.5-flash (GEMINI_API_KEY),
// -model ollama:llama3.2 (a local Ollama).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool/builtin"
)

func main() {
	dir := flag.String("dir", ".", "the directory the assistant works in")
	excli.Main("coder", "List the files here and say what this project does.", func(ctx context.Context, m model.Model, task string) (string, error) {
		return run(ctx, m, *dir, task, os.Stdin, os.Stdout)
	})
}

// run carries out task on the files of dir, asking on in (and writing to
// out) before each command.
func run(ctx context.Context, m model.Model, dir, task string, in io.Reader, out io.Writer) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	read, err := builtin.ReadOnly(dir)
	if err != nil {
		return "", err
	}
	edit, err := builtin.Edit(dir)
	if err != nil {
		return "", err
	}
	sh, err := builtin.Bash(dir, nil)
	if err != nil {
		return "", err
	}
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)
	coder, err := agent.New("coder", m, &agent.Options{
		Instructions: "You are a careful coding assistant working in the current directory. Read files before you " +
			"change them, make small edits with edit_file, and run commands with bash to check your work. " +
			"Finish with a short summary of what you changed.",
		Tools:       append(append(read, edit...), sh),
		Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits}, // bash (execute) asks
	})
	if err != nil {
		return "", err
	}
	if err := coder.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	if !sh.Sandboxed() {
		fmt.Fprintln(out, "note: commands are not sandboxed here (bubblewrap is not installed): they can do whatever you can.")
	}
	answers := bufio.NewReader(in)
	var answer string
	for ev, err := range coder.RunStream(ctx, rt, task, nil) {
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case agent.EventToolCall:
			fmt.Fprintf(out, "-> %s %s\n", ev.ToolCall.ToolName, ev.ToolCall.Arguments)
		case agent.EventToolResult:
			fmt.Fprintf(out, "<- %s\n", firstLine(ev.ToolResult.Result.Text()))
		case agent.EventApproval:
			if ev.Approval.Status != approval.Pending {
				continue
			}
			ans, err := ask(answers, out, ev.Approval)
			if err != nil {
				return "", err
			}
			if _, err := rt.Respond(ctx, ev.Approval.ID, ans); err != nil {
				return "", err
			}
		case agent.EventOutput:
			res, err := coder.Wait(ctx, rt, ev.RunID)
			if err != nil {
				return "", err
			}
			answer = res.Output
		}
	}
	return answer, nil
}

// ask shows the command a waits to run and reads the answer: y runs it, n
// (or nothing) refuses it, anything else is the command to run instead.
func ask(in *bufio.Reader, out io.Writer, a *approval.Approval) (approval.Answer, error) {
	var args struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(a.Arguments, &args)
	fmt.Fprintf(out, "Run `%s`? [y/N, or type another command] ", args.Command)
	line, err := in.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return approval.Answer{}, err
	}
	line = strings.TrimSpace(line)
	ans := approval.Answer{Digest: a.Digest}
	switch strings.ToLower(line) {
	case "y", "yes":
		ans.Approve = true
	case "", "n", "no":
		ans.Message = "the user did not want this command run"
	default:
		edited, _ := json.Marshal(map[string]string{"command": line})
		ans.Approve, ans.Arguments = true, edited
	}
	return ans, nil
}

func firstLine(s string) string {
	line, _, cut := strings.Cut(s, "\n")
	if cut {
		return line + " ..."
	}
	return line
}
