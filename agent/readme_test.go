package agent_test

import (
	"os"
	"strings"
	"testing"
)

// The README's first Go example is ExampleNewText with a real model: from
// the agent on, the lines are the same.
func TestREADMEQuickPathIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README has no Go example")
	}
	example, err := os.ReadFile("quick_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(example), "func ExampleNewText() {\n")
	body, _, _ = strings.Cut(body, "\t// Output:")
	from := func(s string) string {
		i := strings.Index(s, "a := agent.Must(agent.NewText(")
		if i < 0 {
			return ""
		}
		var lines []string
		for l := range strings.SplitSeq(strings.TrimSpace(s[i:]), "\n") {
			lines = append(lines, strings.TrimSpace(l))
		}
		return strings.Join(lines, "\n")
	}
	if got, want := from(block), from(body); got == "" || got != want {
		t.Errorf("the README's first example:\n%s\ndiffers from ExampleNewText:\n%s", got, want)
	}
}

// The README's second Go example, the typed agent with a typed tool, is
// readmeTypedAgent's body, which compiles with the package's tests.
func TestREADMETypedAgentCompiles(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(readme), "```go\n")
	if len(blocks) < 3 {
		t.Fatal("the README has no second Go example")
	}
	block, _, _ := strings.Cut(blocks[2], "```")
	src, err := os.ReadFile("readme_typed_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "func readmeTypedAgent(ctx context.Context) {\n")
	body, _, _ = strings.Cut(body, "\n}\n")
	// Lines compared without their indentation and alignment.
	norm := func(s string) string {
		var lines []string
		for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(lines, "\n")
	}
	if got, want := norm(block), norm(body); got != want {
		t.Errorf("the README's second example:\n%s\ndiffers from readmeTypedAgent:\n%s", got, want)
	}
}

// The README opens with two commands, the main job and CI's test command,
// and says how to install calf and add the library, with go.mod's module
// path.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module, _, _ := strings.Cut(strings.TrimPrefix(string(mod), "module "), "\n")
	_, rest, _ := strings.Cut(string(readme), "```sh\n")
	first, _, _ := strings.Cut(rest, "```")
	var commands []string
	for l := range strings.SplitSeq(strings.TrimSpace(first), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		commands = append(commands, strings.TrimSpace(cmd))
	}
	if len(commands) != 2 || !strings.HasPrefix(commands[0], "go run ./cmd/calf run ") || commands[1] != "go test -race -count=1 ./..." {
		t.Errorf("the README's first commands are %q, want the main job and go test -race -count=1 ./...", commands)
	}
	for _, want := range []string{"go install " + module + "/cmd/calf@latest", "go get " + module + " "} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the README does not say %q", want)
		}
	}
}

// The README's example of dependencies is readmeDeps's body, and runs:
// the tool reads the currency the run was given.
func TestREADMEDepsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\ntype Shop struct")
	block, _, _ := strings.Cut(rest, "```")
	src, err := os.ReadFile("readme_typed_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "func readmeDeps(ctx context.Context, m model.Model) (*agent.Output[string], error) {\n")
	body, _, _ = strings.Cut(body, "\treturn out, err\n}\n")
	norm := func(s string) string {
		var lines []string
		for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(lines, "\n")
	}
	if got, want := norm("type Shop struct"+block), norm(body); !ok || got != want {
		t.Errorf("the README's example of dependencies:\n%s\ndiffers from readmeDeps:\n%s", got, want)
	}
	m := oneCall("price", `{"Item":"mug"}`)
	out, err := readmeDeps(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "saw: 12 EUR" {
		t.Errorf("output %q, want the tool's result 12 EUR", out.Output)
	}
}
