package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// convAgentsFile is a prototypes file of one conversational agent on the
// fake model at serverURL, without subagents.
func convAgentsFile(t *testing.T, serverURL string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "agents.yaml")
	writeFile(t, name, `prototypes:
  - name: conversational-agent
    role: Talks with the user
    model: `+serverURL+`#conv-model
    system_prompt: You talk with the user.
`)
	return name
}

// calf conversations send, served in this process: the answer printed,
// the conversation's earlier exchanges seen by the model of a later
// process, and a stopped conversation refused with the reason.
func TestConversationsSend(t *testing.T) {
	isolate(t)
	srv, fake := newFakeServer(t)
	st := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	file := convAgentsFile(t, srv.URL())
	mustRun(t, exitOK, "prototypes", "add", "--store", st, file)
	c := decodeConversation(t, mustRun(t, exitOK, "conversations", "create", "--store", st, "--user", "u1", "--json").stdout)

	got := mustRun(t, exitOK, "conversations", "send", "--store", st, c.ID, "hello there")
	if got.stdout != "You said: hello there\n" {
		t.Errorf("send printed %q", got.stdout)
	}
	// Another process, with the prototypes of --agents: the entry
	// instance's session holds the first exchange.
	got = mustRun(t, exitOK, "conversations", "send", "--store", st, "--agents", file, "--json", c.ID, "and again")
	var m conversation.ConversationMessage
	if err := json.Unmarshal([]byte(got.stdout), &m); err != nil {
		t.Fatalf("send --json: %v\n%s", err, got.stdout)
	}
	if m.Message != "You said: and again" || m.AgentID != c.Entry || m.ConversationID != c.ID || m.CorrelationID == "" {
		t.Errorf("send --json answered %+v", m)
	}
	reqs := fake.requests()
	// One model call a message: the second process's recovery does not
	// answer the first message again.
	if len(reqs) != 2 {
		t.Errorf("%d model requests for two messages, want 2", len(reqs))
	}
	var seen []string
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role != model.RoleSystem {
			seen = append(seen, string(msg.Role)+": "+msg.Text())
		}
	}
	if want := "user: hello there|assistant: You said: hello there|user: and again"; strings.Join(seen, "|") != want {
		t.Errorf("the model saw %q, want %q", strings.Join(seen, "|"), want)
	}

	// Another user's, a bad id, flags of the host with a remote broker.
	got = mustRun(t, exitUsage, "conversations", "send", "--store", st, "--user", "u2", c.ID, "hi")
	if !strings.Contains(got.stderr, `conversation `+c.ID+` is user "u1"'s`) {
		t.Errorf("send as another user: stderr %q", got.stderr)
	}
	mustRun(t, exitUsage, "conversations", "send", "--store", st, "not-an-id", "hi")
	mustRun(t, exitUsage, "conversations", "send", "--store", st, c.ID)
	got = mustRun(t, exitUsage, "conversations", "send", "--store", st, "--broker", "nats://127.0.0.1:4222", "--agents", file, c.ID, "hi")
	if !strings.Contains(got.stderr, "--agents configures the agents of a conversation served in this process") {
		t.Errorf("send --broker --agents: stderr %q", got.stderr)
	}

	mustRun(t, exitOK, "conversations", "stop", "--store", st, c.ID)
	n := len(fake.requests())
	got = mustRun(t, exitFailure, "conversations", "send", "--store", st, c.ID, "still there?")
	if !strings.Contains(got.stderr, "conversation: stopped: conversation "+c.ID) || got.stdout != "" {
		t.Errorf("send to a stopped conversation: stdout %q, stderr %q", got.stdout, got.stderr)
	}
	if len(fake.requests()) != n {
		t.Error("a message to a stopped conversation reached the model")
	}
}

// calf chat --conversation in a terminal: the exchanges so far shown, a
// message answered, the conversation's history read back, and a message
// after the conversation is stopped refused with the reason.
func TestChatConversationInTmux(t *testing.T) {
	dir := t.TempDir()
	bin := buildCalf(t, dir, "test")
	srv, _ := newFakeServer(t)
	isolate(t)
	st := "sqlite:" + filepath.Join(dir, "calf.db")
	mustRun(t, exitOK, "prototypes", "add", "--store", st, convAgentsFile(t, srv.URL()))
	c := decodeConversation(t, mustRun(t, exitOK, "conversations", "create", "--store", st, "--user", "u1", "--json").stdout)
	mustRun(t, exitOK, "conversations", "send", "--store", st, c.ID, "first words")

	script := filepath.Join(dir, "chat.sh")
	var sb strings.Builder
	for _, kv := range calfEnv(dir) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(k, " ;()") {
			continue
		}
		fmt.Fprintf(&sb, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&sb, "'%s' chat --store '%s' --conversation %s\necho \"chat exited $?\"\nsleep 600\n", bin, st, c.ID)
	writeFile(t, script, sb.String())
	x := newTmux(t, script)
	s := x.waitFor("the conversation so far: 1 exchanges", 1)
	if !strings.Contains(s, "conversation "+c.ID) || !strings.Contains(s, "› first words") || !strings.Contains(s, "You said: first words") {
		t.Errorf("the chat's start:\n%s", s)
	}
	x.keys("hello chat", "Enter")
	x.waitFor("You said: hello chat", 1)
	x.keys("/history", "Enter")
	x.waitFor("(2 exchanges)", 1)

	mustRun(t, exitOK, "conversations", "stop", "--store", st, c.ID)
	x.keys("still there?", "Enter")
	x.waitAfter("› still there?", "not sent: conversation: stopped: conversation "+c.ID, 1)
	x.keys("C-d")
	x.waitFor("chat exited 0", 1)
}

// calf chat --conversation in a terminal shows the history first, each
// tool call of the entry instance's runs and its result as they come, and
// answers broken between words at the terminal's width.
func TestChatConversationShowsToolsAndWraps(t *testing.T) {
	dir := t.TempDir()
	bin := buildCalf(t, dir, "test")
	srv, _ := newFakeServer(t)
	isolate(t)
	// The note's first line, which the fake model's answer quotes, is
	// longer than the terminal's 120 columns.
	var words []string
	for i := range 40 {
		words = append(words, fmt.Sprintf("w%04d", i))
	}
	long := strings.Join(words, " ")
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "note.txt"), long+"\nsecond line\n")
	st := "sqlite:" + filepath.Join(dir, "calf.db")
	agents := filepath.Join(dir, "agents.yaml")
	writeFile(t, agents, `prototypes:
  - name: conversational-agent
    role: Reads notes
    model: `+srv.URL()+`#conv-model
    system_prompt: You read notes.
    tools: [read_file]
`)
	mustRun(t, exitOK, "prototypes", "add", "--store", st, agents)
	c := decodeConversation(t, mustRun(t, exitOK, "conversations", "create", "--store", st, "--user", "u1", "--json").stdout)
	mustRun(t, exitOK, "conversations", "send", "--store", st, "--agents", agents, "--root", root, c.ID, "what does the note say?")

	script := filepath.Join(dir, "chat.sh")
	var sb strings.Builder
	for _, kv := range calfEnv(dir) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(k, " ;()") {
			continue
		}
		fmt.Fprintf(&sb, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&sb, "'%s' chat --store '%s' --agents '%s' --root '%s' --conversation %s\necho \"chat exited $?\"\nsleep 600\n", bin, st, agents, root, c.ID)
	writeFile(t, script, sb.String())
	x := newTmux(t, script)
	s := x.waitFor("now ──", 1)
	if !strings.Contains(s, "the conversation so far: 1 exchanges") || !strings.Contains(s, "› what does the note say?") ||
		!strings.Contains(s, "The note says: w0000") {
		t.Errorf("the history first:\n%s", s)
	}
	// The history's answer, longer than a line, is broken between words.
	words40 := regexp.MustCompile(`w\d{4}`)
	history := s[strings.Index(s, "the conversation so far"):strings.Index(s, "── now ──")]
	if got := words40.FindAllString(history, -1); len(got) != 40 {
		t.Errorf("the history shows %d whole words of 40: broken in a word?\n%s", len(got), s)
	}
	x.keys(long+" again", "Enter")
	// The tool call's events and the answer come on channels of their own,
	// in either order: wait for the screen to settle with all of them, the
	// text streamed meanwhile replaced by the answer.
	var after string
	settled := func() bool {
		s := x.screen()
		i := strings.LastIndex(s, "› w0000")
		if i < 0 {
			return false
		}
		after = s[i:]
		return strings.Contains(after, "→ read_file") && strings.Contains(after, "← ") &&
			strings.Count(after, "The note says") == 1 && len(words40.FindAllString(after, -1)) == 80
	}
	// The message's echo and the answer: 80 whole words, else one was
	// broken; the answer once; the call and its result shown.
	testwait.ForErr(t, 30*time.Second, "the screen to settle with the tool call, its result and the answer, each word whole", func() error {
		if settled() {
			return nil
		}
		return fmt.Errorf("%d words of 80:\n%s", len(words40.FindAllString(after, -1)), after)
	})
	x.keys("C-d")
	x.waitFor("chat exited 0", 1)
}

func TestChatConversationUsageErrors(t *testing.T) {
	isolate(t)
	const id = "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f" // a conversation id that no conversation has
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"chat", "--conversation", id, "--session", "s1"}, "--session resumes a chat with the agent"},
		{[]string{"chat", "--conversation", id, "--system", "x"}, "--system configures the built-in assistant"},
		{[]string{"chat", "--broker", "nats://127.0.0.1:4222"}, "give it with --conversation ID"},
		{[]string{"chat", "--conversation", "nope"}, `conversation "nope"`},
	} {
		got := mustRun(t, exitUsage, tc.args...)
		if !strings.Contains(got.stderr, tc.want) {
			t.Errorf("calf %q: stderr %q, want %q", tc.args, got.stderr, tc.want)
		}
	}
}

// calf conversations send killed with SIGKILL while its message is being
// answered, on the embedded default (the in-process broker, SQLite): the
// next send carries that message on first (its answer in the entry
// instance's session before the new message), then answers its own.
func TestConversationsSendRecoversAfterKill(t *testing.T) {
	dir := t.TempDir()
	bin := buildCalf(t, dir, "test")
	isolate(t)
	calls := make(chan struct{}, 10)
	var n atomic.Int32
	var mu sync.Mutex
	var last *model.Request
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		calls <- struct{}{}
		if n.Add(1) == 1 {
			<-ctx.Done() // the first call never answers: its process is killed
			return nil, ctx.Err()
		}
		mu.Lock()
		last = req
		mu.Unlock()
		return modeltest.Text("You said: " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	t.Cleanup(srv.Close)
	st := "sqlite:" + filepath.Join(dir, "calf.db")
	mustRun(t, exitOK, "prototypes", "add", "--store", st, convAgentsFile(t, srv.URL()))
	c := decodeConversation(t, mustRun(t, exitOK, "conversations", "create", "--store", st, "--user", "u1", "--json").stdout)

	first := exec.Command(bin, "conversations", "send", "--store", st, c.ID, "first words")
	first.Env = calfEnv(dir, envAPIKey+"=test")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	select {
	case <-calls:
	case <-time.After(time.Minute):
		t.Fatal("the model was not called")
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	got := mustRun(t, exitOK, "conversations", "send", "--store", st, "--wait", "30s", c.ID, "second words")
	if got.stdout != "You said: second words\n" {
		t.Errorf("send printed %q", got.stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	var seen []string
	for _, msg := range last.Messages {
		if msg.Role != model.RoleSystem {
			seen = append(seen, string(msg.Role)+": "+msg.Text())
		}
	}
	if want := "user: first words|assistant: You said: first words|user: second words"; strings.Join(seen, "|") != want {
		t.Errorf("the model saw %q, want %q", strings.Join(seen, "|"), want)
	}
	if k := n.Load(); k != 3 {
		t.Errorf("%d model calls, want 3 (the first message's twice, the second's once)", k)
	}
}
