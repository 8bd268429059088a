package conversation_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/store"
)

func TestLoadGoodFile(t *testing.T) {
	ps, err := conversation.LoadFile("testdata/conversations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []conversation.Prototype{
		{
			Name: "conversational-agent", Role: "Orchestrator and user-facing AI",
			Description: "Keeps the conversation with the user, answers in natural language, and starts specialised agents for tool work, whose results it summarizes for the user.\n",
			Kind:        conversation.KindLLM, Model: "anthropic:claude-sonnet-4-5",
			SystemPrompt: "You talk with the user. When a task needs a document memory, start\nthe docmem agent and send it commands; tell the user what came of\nthem in plain words.\n",
			Tools:        []string{"web_fetch"}, Subagents: []string{"docmem-agent"},
			Permissions: &conversation.Permissions{Mode: "accept_reads", Disallowed: []string{"bash"}},
		},
		{
			Name: "docmem-agent", Role: "Tool executor for docmem operations",
			Description: "Executes docmem commands on the conversation's documents; no model.", Kind: conversation.KindCode,
		},
	}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Errorf("prototypes (-want +got):\n%s", diff)
	}
}

// problems parses src and returns its problems, failing when it parses.
func problems(t *testing.T, src string) []conversation.Problem {
	t.Helper()
	_, err := conversation.Parse([]byte(src))
	var ve *conversation.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, conversation.ErrInvalid) {
		t.Fatalf("Parse: %v, want a *ValidationError matching ErrInvalid", err)
	}
	return ve.Problems
}

func TestParseProblems(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		field     string
		contains  string
	}{
		{"unknown kind", "prototypes:\n  - name: a\n    kind: robot\n", 3, "kind", `unknown kind "robot"`},
		{"missing name", "prototypes:\n  - role: x\n    kind: code\n", 2, "name", "missing name"},
		{"bad name", "prototypes:\n  - name: Bad.Name\n", 2, "name", "does not start with a lowercase letter"},
		{"duplicate names", "prototypes:\n  - name: a\n    kind: code\n  - name: a\n    kind: code\n", 4, "name", "defined twice (first at line 2)"},
		{"unknown subagent", "prototypes:\n  - name: a\n    subagents: [b]\n", 3, "subagents", `"b" names no prototype`},
		{"cycle", "prototypes:\n  - name: a\n    subagents: [b]\n  - name: b\n    subagents: [c]\n  - name: c\n    subagents: [a]\n", 3, "subagents", "a cycle of subagents: a -> b -> c -> a"},
		{"self subagent", "prototypes:\n  - name: a\n    subagents: [a]\n", 3, "subagents", "names the prototype itself"},
		{"bad model", "prototypes:\n  - name: a\n    model: \"anthropic:\"\n", 3, "model", "no model name"},
		{"bad model URL", "prototypes:\n  - name: a\n    model: \"http://#x\"\n", 3, "model", "invalid base URL"},
		{"unknown tool", "prototypes:\n  - name: a\n    tools: [read_file, rm_rf]\n", 3, "tools", `unknown built-in tool "rm_rf"`},
		{"unknown field", "prototypes:\n  - name: a\n    modle: x\n", 3, "", `unknown field "modle"`},
		{"wrong type", "prototypes:\n  - name: a\n    tools: 5\n", 3, "tools", "cannot unmarshal"},
		{"model on code", "prototypes:\n  - name: a\n    kind: code\n    model: openai:gpt-4.1\n", 4, "model", "only an llm prototype"},
		{"mcp server without command or url", "prototypes:\n  - name: a\n    mcp_servers:\n      - name: fs\n", 3, "mcp_servers", "needs a command or a url"},
		{"unknown mcp field", "prototypes:\n  - name: a\n    mcp_servers:\n      - name: fs\n        cmd: [x]\n", 4, "mcp_servers", "field cmd not found"},
		{"permission mode", "prototypes:\n  - name: a\n    permissions: {mode: yolo}\n", 3, "permissions", `unknown mode "yolo"`},
		{"bad pattern", "prototypes:\n  - name: a\n    permissions: {allowed: [\"web_[\"]}\n", 3, "permissions", "bad tool pattern"},
		{"flow key", "prototypes:\n  - name: a\n    flow: {key: tenant}\n", 3, "flow", `key "tenant": session, first_word, or none`},
		{"flow rate", "prototypes:\n  - name: a\n    flow: {rate: 10 a minute}\n", 3, "flow", "want N/DURATION"},
		{"flow rate period", "prototypes:\n  - name: a\n    flow: {rate: 10/soon}\n", 3, "flow", "the period is not a positive duration"},
		{"flow debounce", "prototypes:\n  - name: a\n    flow: {debounce: -2s}\n", 3, "flow", "a positive duration"},
		{"flow on code", "prototypes:\n  - name: a\n    kind: code\n    flow: {concurrency: 2}\n", 4, "flow", "only an llm prototype"},
		{"flow field", "prototypes:\n  - name: a\n    flow: {concurency: 2}\n", 3, "flow", "field concurency not found"},
		{"top level", "agents: []\n", 1, "", `unknown field "agents"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probs := problems(t, c.src)
			for _, p := range probs {
				if p.Line == c.line && p.Field == c.field && strings.Contains(p.Message, c.contains) {
					return
				}
			}
			t.Errorf("no problem at line %d, field %q, saying %q; got %q", c.line, c.field, c.contains, probs)
		})
	}
}

// TestParseListsEveryProblem puts many problems in one file: each is
// reported, with its line, in one error.
func TestParseListsEveryProblem(t *testing.T) {
	src := `prototypes:
  - name: entry
    kind: robot
    model: "anthropic:"
    tools: [grep, teleport]
    subagents: [ghost, loop-a]
  - role: nameless
  - name: loop-a
    kind: code
    subagents: [loop-b]
  - name: loop-b
    kind: code
    subagents: [loop-a]
  - name: entry
    kind: code
`
	_, err := conversation.Parse([]byte(src))
	var ve *conversation.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse: %v", err)
	}
	want := map[int]string{
		3:  "unknown kind",
		4:  "no model name",
		5:  "teleport",
		6:  `"ghost" names no prototype`,
		7:  "missing name",
		10: "a cycle of subagents: loop-a -> loop-b -> loop-a",
		14: "defined twice",
	}
	for line, text := range want {
		found := false
		for _, p := range ve.Problems {
			found = found || p.Line == line && strings.Contains(p.Message, text)
		}
		if !found {
			t.Errorf("no problem at line %d saying %q", line, text)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ve.Problems), len(want), err)
	}
	ve.File = "agents.yaml"
	if msg := ve.Error(); !strings.Contains(msg, "agents.yaml:5: prototype entry: tools: unknown built-in tool \"teleport\"") {
		t.Errorf("the message does not give file:line: %s", msg)
	}
}

func TestParseExternalAndMCP(t *testing.T) {
	ps, err := conversation.Parse([]byte(`prototypes:
  - name: searcher
    mcp_servers:
      - name: web
        url: https://mcp.example.com/mcp
      - name: files
        command: [mcp-server-filesystem, /srv]
    permissions: {allowed: ["web_*|read_file"]}
  - name: py-agent
    kind: external
    role: An agent in Python
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []conversation.MCPServer{{Name: "web", URL: "https://mcp.example.com/mcp"}, {Name: "files", Command: []string{"mcp-server-filesystem", "/srv"}}}
	if diff := cmp.Diff(want, ps[0].MCPServers); diff != "" || ps[0].Kind != conversation.KindLLM || ps[1].Kind != conversation.KindExternal {
		t.Errorf("parsed %+v (MCP servers -want +got:\n%s)", ps, diff)
	}
}

func TestParseNotYAML(t *testing.T) {
	for _, src := range []string{"", "prototypes: [\n", "- a\n- b\n", "prototypes: 3\n", "prototypes:\n  - 3\n", "a: 1\n---\nb: 2\n"} {
		if _, err := conversation.Parse([]byte(src)); !errors.Is(err, conversation.ErrInvalid) {
			t.Errorf("Parse(%q): %v, want ErrInvalid", src, err)
		}
	}
	if _, err := conversation.LoadFile("testdata/missing.yaml"); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
}

func TestPrototypesInStore(t *testing.T) {
	ps, err := conversation.LoadFile("testdata/conversations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		r := conversation.NewPrototypes(s)
		if err := r.RegisterAll(ctx, ps, false); err != nil {
			t.Fatal(err)
		}
		if err := r.Register(ctx, ps[1], false); !errors.Is(err, conversation.ErrExists) {
			t.Errorf("Register of a registered name: %v, want ErrExists", err)
		}
		got, err := r.Get(ctx, "conversational-agent")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ps[0], got); diff != "" {
			t.Errorf("Get (-registered +got):\n%s", diff)
		}
		changed := ps[1]
		changed.Role = "changed"
		if err := r.Register(ctx, changed, true); err != nil {
			t.Fatalf("Register with replace: %v", err)
		}
		all, err := r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[0].Name != "conversational-agent" || all[1].Role != "changed" {
			t.Errorf("List: %+v", all)
		}
		rec, err := s.Get(ctx, "conversation_prototype", "docmem-agent")
		if err != nil || rec.Version != 2 {
			t.Errorf("the record after a replace: version %d, %v; want version 2", rec.Version, err)
		}
		if err := r.Remove(ctx, "docmem-agent"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Get(ctx, "docmem-agent"); !errors.Is(err, conversation.ErrNotFound) {
			t.Errorf("Get after Remove: %v, want ErrNotFound", err)
		}
		if err := r.Remove(ctx, "docmem-agent"); !errors.Is(err, conversation.ErrNotFound) {
			t.Errorf("Remove again: %v, want ErrNotFound", err)
		}
		if err := r.Register(ctx, conversation.Prototype{Name: "x", Kind: "robot"}, false); !errors.Is(err, conversation.ErrInvalid) {
			t.Errorf("Register of an invalid prototype: %v, want ErrInvalid", err)
		}
		bad := []conversation.Prototype{{Name: "p", Subagents: []string{"q"}}}
		if err := r.RegisterAll(ctx, bad, false); !errors.Is(err, conversation.ErrInvalid) {
			t.Errorf("RegisterAll with an unknown subagent: %v", err)
		}
		if _, err := r.Get(ctx, "p"); !errors.Is(err, conversation.ErrNotFound) {
			t.Errorf("an invalid set was partly registered: %v", err)
		}
	})
}

// TestParseNoFalseCycle: shared subagents (a diamond) are no cycle.
func TestParseNoFalseCycle(t *testing.T) {
	_, err := conversation.Parse([]byte(`prototypes:
  - name: a
    subagents: [b, c]
  - name: b
    subagents: [d]
  - name: c
    subagents: [d]
  - name: d
    kind: code
`))
	if err != nil {
		t.Errorf("a diamond of subagents: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile("testdata/conversations.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("prototypes:\n  - name: a\n    subagents: [b]\n  - name: b\n    subagents: [a]\n"))
	f.Add([]byte("prototypes:\n  - name: a\n    kind: robot\n    tools: 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := conversation.Parse(data)
		if err != nil {
			var ve *conversation.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("an error that lists no problem: %v", err)
			}
			return
		}
		if err := conversation.ValidateSet(ps); err != nil {
			t.Fatalf("a parsed file does not validate: %v", err)
		}
	})
}

// A YAML syntax error is reported on its own line, not on the line where
// the construct it is in begins.
func TestParseSyntaxErrorLine(t *testing.T) {
	for _, tt := range []struct {
		src  string
		line int
	}{
		{"prototypes:\n  - name: a\n   kind: llm\n", 3},
		{"prototypes:\n  - name: a\n    kind: llm\n  - name: b\n   kind: code\n", 5},
		{"prototypes:\n  - name: a\n    role: \"open\n    kind: llm\n  -x: [\n", 0},
		{"prototypes:\n  - name: a\n\tkind: llm\n", 3},
	} {
		_, err := conversation.Parse([]byte(tt.src))
		var ve *conversation.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		if tt.line > 0 && ve.Problems[0].Line != tt.line {
			t.Errorf("Parse(%q): %v, want line %d", tt.src, err, tt.line)
		}
		if strings.Contains(ve.Problems[0].Message, "line ") {
			t.Errorf("Parse(%q): the message names a line of its own: %v", tt.src, err)
		}
	}
}
