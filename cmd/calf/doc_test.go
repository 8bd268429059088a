package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// go doc ./cmd/calf lists every command in its usage, and says what each
// of their flags does (the agent's, --model, --read…, once, under calf run).
func TestDocListsEveryCommand(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, usage, _ := strings.Cut(string(src), "// Usage:\n")
	usage, _, _ = strings.Cut(usage, "\n//\n// #")
	lines := map[string]string{} // "calf runs show" → its usage line
	for l := range strings.SplitSeq(usage, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(l, "//"))
		var words []string
		for _, w := range strings.Fields(l) {
			if strings.HasPrefix(w, "[") || strings.HasPrefix(w, "-") || strings.ToUpper(w) == w {
				break
			}
			words = append(words, w)
		}
		if len(words) > 0 {
			lines[strings.Join(words, " ")] += " " + l
		}
	}
	agentFlags := map[string]bool{"help": true}
	for _, name := range agentFlagNames {
		agentFlags[name] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.HasSubCommands() {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			return
		}
		path := c.CommandPath()
		if _, ok := lines[path]; !ok {
			t.Errorf("doc.go's usage does not list %s", path)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !agentFlags[f.Name] && !strings.Contains(string(src), "--"+f.Name+" ") {
				t.Errorf("doc.go does not describe --%s of %s", f.Name, path)
			}
		})
	}
	walk(newRootCommand(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, func(string) string { return "" }))
}
