package runblock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/conversation/internal/runblock"
	"github.com/calf-go/calf/internal/convid"
)

func TestParse(t *testing.T) {
	text := "I'll make the document.\n\n# Run\nstart-conversation docmem-agent\nsend docmem-agent docmem-create project-notes\nsend docmem-agent docmem-append project-notes root \"A note, with \\\"quotes\\\"\" 'and $literal \\'\n\nDone soon."
	cmds, rest, err := runblock.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []runblock.Command{
		{Verb: "start-conversation", Target: "docmem-agent", Line: 4},
		{Verb: "send", Target: "docmem-agent", Args: []string{"docmem-create", "project-notes"}, Line: 5},
		{Verb: "send", Target: "docmem-agent", Args: []string{"docmem-append", "project-notes", "root", `A note, with "quotes"`, `and $literal \`}, Line: 6},
	}
	if d := cmp.Diff(want, cmds); d != "" {
		t.Errorf("commands (-want +got):\n%s", d)
	}
	if rest != "I'll make the document.\n\n\nDone soon." {
		t.Errorf("rest = %q", rest)
	}
}

func TestParseFenced(t *testing.T) {
	text := "## run\n```\nsend docmem docmem-outline notes\n\nstart-conversation search-agent\n```\nAfter."
	cmds, rest, err := runblock.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 2 || cmds[0].Args[0] != "docmem-outline" || cmds[1].Target != "search-agent" || cmds[1].Line != 5 {
		t.Errorf("commands: %+v", cmds)
	}
	if rest != "After." {
		t.Errorf("rest = %q", rest)
	}
}

func TestParseNoBlock(t *testing.T) {
	for _, text := range []string{"", "Just an answer.", "# Running a marathon\nsend x y", "#Run\nsend a b"} {
		cmds, rest, err := runblock.Parse(text)
		if err != nil || cmds != nil || rest != strings.TrimSpace(text) {
			t.Errorf("Parse(%q) = %v, %q, %v; want no commands and the text", text, cmds, rest, err)
		}
	}
}

// Every problem is listed with its line, and nothing is to be carried out.
func TestParseProblems(t *testing.T) {
	text := strings.Join([]string{
		"# Run",
		"rm -rf /",                  // 2: unknown verb
		"start-conversation",        // 3: no prototype
		"start-conversation a b",    // 4: two
		"send docmem",               // 5: no command
		`send docmem "unterminated`, // 6
		"send docmem docmem-list",   // 7: fine
		"send x " + strings.Repeat("w ", convid.MaxCommandArgs+1), // 8: too many words
		"",
		"# Run",
		"", // 11... the block at 10 is empty
		"# Run",
		"```",
		"send docmem docmem-list", // 14, fine, but the fence never closes
	}, "\n")
	cmds, _, err := runblock.Parse(text)
	var re *runblock.Error
	if !errors.As(err, &re) || cmds != nil {
		t.Fatalf("Parse = %v, %v; want a *Error and no commands", cmds, err)
	}
	var lines []int
	for _, p := range re.Problems {
		lines = append(lines, p.Line)
	}
	if d := cmp.Diff([]int{2, 3, 4, 5, 6, 8, 10, 12}, lines); d != "" {
		t.Errorf("problem lines (-want +got):\n%s\n%v", d, err)
	}
	if !strings.Contains(err.Error(), `line 2: unknown command "rm"`) {
		t.Errorf("error: %v", err)
	}
}

func TestParseBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Run\n")
	for range runblock.MaxCommands + 1 {
		b.WriteString("send d docmem-list\n")
	}
	if _, _, err := runblock.Parse(b.String()); err == nil || !strings.Contains(err.Error(), "more than 32 commands") {
		t.Errorf("too many commands: %v", err)
	}
	long := "# Run\nsend d " + strings.Repeat("x", runblock.MaxLine)
	if _, _, err := runblock.Parse(long); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a long line: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# Run\nstart-conversation docmem-agent\nsend docmem-agent docmem-create 'a b' \"c\\\"d\"")
	f.Add("## Run\n```\nsend a b\n```\nrest")
	f.Add("# Run\n\\")
	f.Fuzz(func(t *testing.T, text string) {
		cmds, rest, err := runblock.Parse(text)
		if err != nil {
			var re *runblock.Error
			if !errors.As(err, &re) || len(re.Problems) == 0 || cmds != nil {
				t.Fatalf("error %v with commands %v", err, cmds)
			}
		}
		if len(cmds) > runblock.MaxCommands || len(rest) > len(text) {
			t.Fatalf("%d commands, rest of %d bytes from %d", len(cmds), len(rest), len(text))
		}
		for _, c := range cmds {
			if c.Target == "" || (c.Verb == runblock.VerbSend) != (len(c.Args) > 0) || len(c.Args) > convid.MaxCommandArgs {
				t.Fatalf("command %+v", c)
			}
		}
	})
}
