package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf/agent"
)

// lockedBuffer is a bytes.Buffer safe for the pulse's goroutine and the
// test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// On a terminal, a quiet run shows what it waits for after a second,
// says which tool runs after a tool call, is erased before anything else
// is written, stays away from a line written halfway, and shows nothing
// at all where the output is not a terminal.
func TestPulseShowsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		was := isTerminal
		isTerminal = func(io.Writer) bool { return true }
		defer func() { isTerminal = was }()
		var out lockedBuffer
		midLine := false
		p := startPulse(&out, func() bool { return !midLine })
		defer p.close()
		time.Sleep(500 * time.Millisecond)
		if got := out.String(); got != "" {
			t.Fatalf("after half a second: %q, want nothing yet", got)
		}
		time.Sleep(1100 * time.Millisecond)
		if got := out.String(); !strings.HasSuffix(got, "\r\x1b[K… waiting for the model (1s)") {
			t.Fatalf("after 1.6s: %q, want the model waited for", got)
		}
		ev := agent.Event{Kind: agent.EventToolCall, ToolCall: &agent.ToolCallEvent{ToolName: "add"}}
		if err := p.do(&ev, func() error { _, err := io.WriteString(&out, "→ add\n"); return err }); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); !strings.HasSuffix(got, "\r\x1b[K→ add\n") {
			t.Fatalf("the event's line: %q, want the pulse erased first", got)
		}
		time.Sleep(2500 * time.Millisecond)
		if got := out.String(); !strings.HasSuffix(got, "… running add (2s)") {
			t.Fatalf("after a tool call: %q, want the tool named", got)
		}
		// Text written halfway: the pulse keeps off its line.
		_ = p.do(&agent.Event{Kind: agent.EventDelta}, func() error { midLine = true; return nil })
		before := out.String()
		time.Sleep(3 * time.Second)
		if got := out.String(); got != before {
			t.Fatalf("mid-line: %q written, want nothing", strings.TrimPrefix(got, before))
		}
		_ = p.do(nil, func() error { midLine = false; return nil })
		time.Sleep(1300 * time.Millisecond)
		p.close()
		if got := out.String(); !strings.HasSuffix(got, "\r\x1b[K") {
			t.Fatalf("after close: %q, want the line erased", got)
		}
		end := out.String()
		time.Sleep(3 * time.Second)
		if out.String() != end {
			t.Fatal("the pulse wrote after close")
		}
	})
	// Not a terminal: nothing, ever.
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		p := startPulse(&out, func() bool { return true })
		time.Sleep(5 * time.Second)
		p.close()
		if got := out.String(); got != "" {
			t.Fatalf("not a terminal: %q written", got)
		}
	})
}
