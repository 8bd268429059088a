package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/calf-go/calf/agent"
)

// pulseAfter is how long a run is quiet before the pulse shows it is
// waiting; pulseEvery how often the shown line is rewritten.
const (
	pulseAfter = time.Second
	pulseEvery = 250 * time.Millisecond
)

// pulse shows, on a terminal, that a run is alive while nothing else
// does: after a quiet second, with nothing written mid-line, a line on
// errOut such as "… waiting for the model (4s)", rewritten in place and
// erased before anything else is written. What is written through
// [pulse.do] and the pulse's own line never interleave.
type pulse struct {
	mu     sync.Mutex
	w      io.Writer
	idle   func() bool // nothing is written mid-line
	since  time.Time   // the last event
	doing  string      // what the run waits for
	shown  bool
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// isTerminal reports whether w is a terminal; tests replace it.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startPulse starts the pulse on w when it is a terminal, or returns a
// pulse that shows nothing. idle reports whether the view's line is
// empty; it is called with the pulse's lock held, as the view's writes
// are.
func startPulse(w io.Writer, idle func() bool) *pulse {
	p := &pulse{w: w, idle: idle, since: time.Now(), doing: "waiting for the model"}
	if !isTerminal(w) {
		return p
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.run()
	return p
}

func (p *pulse) run() {
	defer close(p.done)
	t := time.NewTicker(pulseEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			if quiet := now.Sub(p.since); quiet >= pulseAfter && p.idle() {
				fmt.Fprintf(p.w, "\r\x1b[K… %s (%ds)", p.doing, int(quiet.Seconds()))
				p.shown = true
			}
			p.mu.Unlock()
		}
	}
}

// do erases the pulse's line, runs write (which shows ev, or asks the
// user something) and starts the quiet time again, saying what the run
// waits for after ev.
func (p *pulse) do(ev *agent.Event, write func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
	err := write()
	p.since = time.Now()
	if ev != nil {
		switch ev.Kind {
		case agent.EventToolCall:
			p.doing = "running " + ev.ToolCall.ToolName
		case agent.EventSubagentSpawned:
			p.doing = "waiting for a subagent"
		case agent.EventApproval:
			p.doing = "waiting for an approval"
		default:
			p.doing = "waiting for the model"
		}
	}
	return err
}

// close stops the pulse and erases its line.
func (p *pulse) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
}
