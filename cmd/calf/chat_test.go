package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

// tmux drives a terminal program: a session of its own, keys sent, the
// screen read back.
type tmux struct {
	t       *testing.T
	session string
	log     string // a file the program logs to, shown when a wait fails
}

func newTmux(t *testing.T, script string) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatal("tmux is not installed")
		}
		t.Skip("tmux is not installed")
	}
	x := &tmux{t: t, session: "calf-" + calf.NewID()[:8]}
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", x.session, "-x", "120", "-y", "50", "sh", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", x.session).Run() })
	return x
}

func (x *tmux) keys(keys ...string) {
	x.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"send-keys", "-t", x.session}, keys...)...).CombinedOutput(); err != nil {
		x.t.Fatalf("send-keys: %v %s", err, out)
	}
}

func (x *tmux) screen() string {
	out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", x.session, "-S", "-200").Output()
	return string(out)
}

// waitFor waits until the screen shows want count times, and returns the
// screen.
func (x *tmux) waitFor(want string, count int) string {
	x.t.Helper()
	return x.waitAfter("", want, count)
}

// waitAfter waits until the screen shows want count times after the last
// line that shows mark, and returns the screen.
func (x *tmux) waitAfter(mark, want string, count int) string {
	x.t.Helper()
	var s string
	testwait.ForErr(x.t, 60*time.Second, fmt.Sprintf("the screen to show %q (%d times)", want, count), func() error {
		s = x.screen()
		// Until the mark shows, what the screen shows before it (an
		// earlier turn's prompt, say) does not count.
		i := 0
		if mark != "" {
			i = strings.LastIndex(s, mark)
		}
		if i >= 0 && strings.Count(s[i:], want) >= count {
			return nil
		}
		var log []byte
		if x.log != "" {
			log, _ = os.ReadFile(x.log)
		}
		return fmt.Errorf("the screen:\n%s\nthe program's log:\n%s", s, log)
	})
	return s
}

// calf chat in a terminal: a conversation with a tool call asked about and
// allowed, a second turn that remembers the first, the slash commands, a
// denial, and leaving; the session is resumed by a second chat.
func TestChatInTmux(t *testing.T) {
	dir := t.TempDir()
	bin := buildCalf(t, dir, "test")
	srv, fake := newFakeServer(t)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "note.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "chat.sh")
	chatLog := filepath.Join(dir, "chat.log")
	env := calfEnv(dir, envBaseURL+"="+srv.URL(), envAPIKey+"=test", envChatLog+"="+chatLog)
	var sb strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(k, " ;()") {
			continue
		}
		fmt.Fprintf(&sb, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&sb, "cd '%s'\n'%s' chat --store sqlite:'%s' --read . --mode ask --session talk-1 \"$@\"\necho \"chat exited $?\"\nsleep 600\n", work, bin, filepath.Join(dir, "chat.db"))
	if err := os.WriteFile(script, []byte(sb.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	x := newTmux(t, script)
	x.log = chatLog
	x.waitFor("session talk-1", 1)
	x.keys("what does the note say?", "Enter")
	s := x.waitFor("needs approval", 1)
	if !strings.Contains(s, "read_file") || !strings.Contains(s, "[y] allow") {
		t.Fatalf("the approval prompt:\n%s", s)
	}
	x.keys("y")
	// The answer streams in before the run ends; its usage line comes at
	// the end.
	s = x.waitFor("tokens in", 1)
	if !strings.Contains(s, "allowed read_file") || !strings.Contains(s, `→ read_file {"path":"note.txt"}`) || !strings.Contains(s, "The note says: buy milk") {
		t.Errorf("after the approval:\n%s", s)
	}
	x.waitFor("› ask anything", 1)
	// Slash commands.
	x.keys("/cost", "Enter")
	x.waitFor("session talk-1: 1 runs", 1)
	x.keys("/sessions", "Enter")
	x.waitFor("* talk-1", 1)
	x.keys("/fork", "Enter")
	s = x.waitFor("now current", 1)
	if !strings.Contains(s, "forked talk-1 into talk-1-fork ") {
		t.Errorf("fork:\n%s", s)
	}
	x.keys("/resume talk-1", "Enter")
	s = x.waitFor("resumed session talk-1: ", 1)
	if !strings.Contains(s, "› what does the note say?") {
		t.Errorf("resume shows no conversation:\n%s", s)
	}
	x.keys("/model", "Enter")
	x.waitFor("model openai:", 1)
	x.keys("/bogus", "Enter")
	x.waitFor("unknown command /bogus", 1)
	// A second question, denied this time: the model hears it.
	x.keys("and again?", "Enter")
	x.waitAfter("› and again?", "needs approval", 1)
	x.keys("n")
	x.waitFor("denied read_file", 1)
	x.waitAfter("› and again?", "The note says:", 1)
	// The model saw the first turn in the second.
	reqs := fake.requests()
	last := reqs[len(reqs)-1]
	var texts []string
	for _, m := range last.Messages {
		texts = append(texts, string(m.Role)+":"+m.Text())
	}
	if joined := strings.Join(texts, "|"); !strings.Contains(joined, "user:what does the note say?") || !strings.Contains(joined, "refused") {
		t.Errorf("the last model call saw %q", joined)
	}
	x.keys("C-d")
	x.waitFor("chat exited 0", 1)

	// A new chat resumes the session.
	y := newTmux(t, script)
	s = y.waitFor("resumed: ", 1)
	if !strings.Contains(s, "session talk-1") {
		t.Errorf("resume:\n%s", s)
	}
	y.keys("C-c")
	y.waitFor("chat exited 0", 1)
}
