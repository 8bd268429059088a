package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store/sqlite"
)

// agentsFile is a prototypes file: a conversational agent with a docmem
// agent, and a poet. serverURL is the fake model's base URL.
func agentsFile(t *testing.T, serverURL string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "agents.yaml")
	data := `prototypes:
  - name: conversational-agent
    role: Orchestrator and user-facing AI
    model: ` + serverURL + `#conv-model
    system_prompt: You talk with the user.
    subagents: [docmem-agent]
  - name: docmem-agent
    role: Tool executor for docmem operations
    kind: code
  - name: poet
    role: Writes verse
    model: ` + serverURL + `#poet-model
    system_prompt: Answer in verse.
    tools: [read_file]
    permissions: {mode: accept_reads}
`
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// mustRun runs calf with args and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) result {
	t.Helper()
	got := runMain(t.Context(), "", args...)
	if got.code != want {
		t.Fatalf("calf %q = %d, want %d; stdout %q, stderr %q", args, got.code, want, got.stdout, got.stderr)
	}
	return got
}

func TestPrototypes(t *testing.T) {
	isolate(t)
	st := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	file := agentsFile(t, "http://127.0.0.1:1/v1")

	got := mustRun(t, exitOK, "prototypes", "add", "--store", st, file)
	want := "registered conversational-agent (llm)\nregistered docmem-agent (code)\nregistered poet (llm)\n"
	if got.stdout != want {
		t.Errorf("prototypes add printed %q, want %q", got.stdout, want)
	}
	// Again: refused as docs/conversations.md says (status 2), every name
	// listed, unless --replace.
	got = mustRun(t, exitUsage, "prototypes", "add", "--store", st, file)
	if !strings.Contains(got.stderr, "registered already: conversational-agent, docmem-agent, poet (add --replace") {
		t.Errorf("prototypes add again: stderr %q", got.stderr)
	}
	got = mustRun(t, exitOK, "prototypes", "add", "--replace", "--store", st, file)
	if !strings.HasPrefix(got.stdout, "replaced conversational-agent (llm)\n") {
		t.Errorf("prototypes add --replace printed %q", got.stdout)
	}

	got = mustRun(t, exitOK, "prototypes", "list", "--store", st)
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[3], "poet ") || !strings.Contains(lines[3], "read_file") {
		t.Errorf("prototypes list:\n%s", got.stdout)
	}
	got = mustRun(t, exitOK, "prototypes", "list", "--json", "--store", st)
	var names []string
	for l := range strings.SplitSeq(strings.TrimSpace(got.stdout), "\n") {
		var p conversation.Prototype
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("prototypes list --json: %v\n%s", err, got.stdout)
		}
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"conversational-agent", "docmem-agent", "poet"}, names); diff != "" {
		t.Errorf("prototypes list --json (-want +got):\n%s", diff)
	}

	got = mustRun(t, exitOK, "prototypes", "show", "--store", st, "poet")
	for _, s := range []string{"name:          poet\n", "kind:          llm\n", "permissions:   mode accept_reads\n", "system prompt:\n  Answer in verse.\n"} {
		if !strings.Contains(got.stdout, s) {
			t.Errorf("prototypes show lacks %q:\n%s", s, got.stdout)
		}
	}
	got = mustRun(t, exitOK, "prototypes", "show", "--json", "--store", st, "poet")
	var p conversation.Prototype
	if err := json.Unmarshal([]byte(got.stdout), &p); err != nil || p.SystemPrompt != "Answer in verse." {
		t.Errorf("prototypes show --json = %+v, %v", p, err)
	}

	mustRun(t, exitOK, "prototypes", "rm", "--store", st, "poet")
	got = mustRun(t, exitFailure, "prototypes", "show", "--store", st, "poet")
	if !strings.Contains(got.stderr, "not found") {
		t.Errorf("show of a removed prototype: stderr %q", got.stderr)
	}
	mustRun(t, exitFailure, "prototypes", "rm", "--store", st, "poet")
}

// A file with problems: every one is reported with its line, and nothing
// is registered.
func TestPrototypesAddInvalid(t *testing.T) {
	isolate(t)
	st := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	file := filepath.Join(t.TempDir(), "bad.yaml")
	data := `prototypes:
  - name: good
    system_prompt: Fine.
  - name: Bad
    kind: robot
  - name: other
    subagents: [nobody]
    colour: red
`
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	got := mustRun(t, exitUsage, "prototypes", "add", "--store", st, file)
	for _, s := range []string{"4 problem(s)", file + ":4: prototype Bad: name:", file + ":5: prototype Bad: kind:",
		file + ":7: prototype other: subagents:", file + `:8: prototype other: unknown field "colour"`} {
		if !strings.Contains(got.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, got.stderr)
		}
	}
	got = mustRun(t, exitOK, "prototypes", "list", "--json", "--store", st)
	if got.stdout != "" {
		t.Errorf("prototypes registered from a file with problems:\n%s", got.stdout)
	}
}

func TestConversations(t *testing.T) {
	isolate(t)
	st := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	// Without the entry prototype registered, there is no conversation.
	mustRun(t, exitFailure, "conversations", "create", "--store", st)
	mustRun(t, exitOK, "prototypes", "add", "--store", st, agentsFile(t, "http://127.0.0.1:1/v1"))

	got := mustRun(t, exitOK, "conversations", "create", "--store", st, "--user", "u1", "--description", "User chat", "--json")
	var c conversation.Conversation
	if err := json.Unmarshal([]byte(got.stdout), &c); err != nil {
		t.Fatalf("conversations create --json: %v\n%s", err, got.stdout)
	}
	if c.UserID != "u1" || c.Description != "User chat" || c.Status != conversation.StatusRunning || c.Entry != convid.InstanceID("conversational-agent", c.ID) {
		t.Errorf("created %+v", c)
	}
	got = mustRun(t, exitOK, "conversations", "create", "--store", st, "--entry", "poet")
	id2, _, _ := strings.Cut(strings.TrimPrefix(got.stdout, "conversation "), "\n")
	in, _ := conversation.Channel(id2, conversation.UserParticipant, convid.InstanceID("poet", id2))
	if !strings.Contains(got.stdout, "send on      "+in+"\n") {
		t.Errorf("conversations create printed:\n%s", got.stdout)
	}

	got = mustRun(t, exitOK, "conversations", "list", "--store", st)
	if !strings.Contains(got.stdout, c.ID+"  u1    running") || !strings.Contains(got.stdout, id2) {
		t.Errorf("conversations list:\n%s", got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "list", "--json", "--store", st)
	if n := strings.Count(got.stdout, "\n"); n != 2 {
		t.Errorf("conversations list --json printed %d lines:\n%s", n, got.stdout)
	}

	got = mustRun(t, exitOK, "conversations", "show", "--store", st, c.ID)
	for _, s := range []string{"status        running", c.Entry + "  conversational-agent  user", convid.TopicName("user", c.Entry)} {
		if !strings.Contains(got.stdout, s) {
			t.Errorf("conversations show lacks %q:\n%s", s, got.stdout)
		}
	}

	got = mustRun(t, exitOK, "conversations", "stop", "--store", st, c.ID)
	if !strings.HasPrefix(got.stdout, "stopped "+c.ID+" at ") {
		t.Errorf("conversations stop printed %q", got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "show", "--json", "--store", st, c.ID)
	var v conversationView
	if err := json.Unmarshal([]byte(got.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.Conversation.Status != conversation.StatusStopped || len(v.Instances) != 1 || v.Instances[0].Status != conversation.StatusStopped ||
		len(v.Topics) != 1 || v.Topics[0].Participants != [2]string{"user", c.Entry} {
		t.Errorf("after stop: %+v", v)
	}

	mustRun(t, exitFailure, "conversations", "show", "--store", st, "00000000-0000-4000-8000-000000000000")
	mustRun(t, exitUsage, "conversations", "show", "--store", st, "not-an-id")
	mustRun(t, exitUsage, "conversations", "stop", "--store", st, "--broker", "memory://", c.ID)
}

// writeFile writes data to name.
func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// decodeConversation decodes the JSON a conversations command printed.
func decodeConversation(t *testing.T, out string) conversation.Conversation {
	t.Helper()
	var c conversation.Conversation
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return c
}

// TestConversationsRestart: a failed instance shows in list and show with
// its error, and restart puts it back to work.
func TestConversationsRestart(t *testing.T) {
	isolate(t)
	path := filepath.Join(t.TempDir(), "calf.db")
	st := "sqlite:" + path
	mustRun(t, exitOK, "prototypes", "add", "--store", st, agentsFile(t, "http://127.0.0.1:1/v1"))
	c := decodeConversation(t, mustRun(t, exitOK, "conversations", "create", "--store", st, "--json").stdout)

	db, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := conversation.NewConversations(db, nil).Fail(t.Context(), c.ID, c.Entry, "the run failed: model unreachable"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	got := mustRun(t, exitOK, "conversations", "list", "--store", st)
	if !strings.Contains(got.stdout, "1: the run failed: model unreachable") {
		t.Errorf("conversations list does not show the failed instance:\n%s", got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "list", "--json", "--store", st)
	var row struct {
		ID     string                  `json:"id"`
		Failed []conversation.Instance `json:"failed_instances"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &row); err != nil || row.ID != c.ID || len(row.Failed) != 1 || row.Failed[0].Error != "the run failed: model unreachable" {
		t.Errorf("conversations list --json = %+v, %v:\n%s", row, err, got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "show", "--store", st, c.ID)
	if !strings.Contains(got.stdout, "error: the run failed: model unreachable") {
		t.Errorf("conversations show does not show the error:\n%s", got.stdout)
	}

	got = mustRun(t, exitOK, "conversations", "restart", "--store", st, c.ID)
	if got.stdout != "restarted "+c.Entry+"\n" {
		t.Errorf("conversations restart printed %q", got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "show", "--json", "--store", st, c.ID)
	var v conversationView
	if err := json.Unmarshal([]byte(got.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Instances) != 1 || v.Instances[0].Status != conversation.StatusRunning || v.Instances[0].Error != "" {
		t.Errorf("after restart: %+v", v.Instances)
	}
	got = mustRun(t, exitOK, "conversations", "restart", "--store", st, c.ID)
	if !strings.HasPrefix(got.stdout, "no failed instance") {
		t.Errorf("a second restart printed %q", got.stdout)
	}
	mustRun(t, exitFailure, "conversations", "restart", "--store", st, c.ID, "ghost-"+c.ID)
	mustRun(t, exitUsage, "conversations", "restart", "--store", st)
	mustRun(t, exitFailure, "conversations", "restart", "--store", st, "00000000-0000-4000-8000-000000000000")
}
