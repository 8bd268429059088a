package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/tool"
)

// view shows the events of a run as they happen.
type view interface {
	// show shows one event. An error (writing the output) stops the run.
	show(ev agent.Event) error
	// close ends the view once the run has ended, well or not.
	close() error
}

// lineWidth bounds the runes of a tool call's or result's line on stderr.
const lineWidth = 100

// humanView streams the answer's text to out and shows tool calls and their
// results on errOut, one line each. Quiet, it shows only the final answer.
type humanView struct {
	out, errOut io.Writer
	quiet       bool
	// records returns the tool calls a run recorded, to show at its end
	// those whose events the stream did not bring in order. Nil means
	// none are looked up.
	records func(runID string) ([]agent.ToolCallRecord, error)

	// midLine is true when out's last byte is not a newline.
	midLine bool
	// textStep is the step of the text last written.
	textStep int
	// streamed records the steps whose text was streamed, and that text.
	streamed map[int]*strings.Builder
	// calls are the lines of tool calls not yet shown, of step callStep.
	// A step's tool calls may reach the stream before the end of its
	// text, so they wait for the next event that follows all of it.
	calls    []string
	callStep int
	// called and answered hold the ids of the tool calls, and of the
	// results, that are shown or about to be.
	called, answered map[string]bool
	// done is set once the output is shown.
	done bool
	// unanswered are the results held back because their call was not
	// seen, in case the run's records cannot be read.
	unanswered []*agent.ToolResultEvent
	// late are the lines of tool calls and results of an earlier step that
	// came while a later step's text was mid-line. They wait for the end
	// of that line rather than break it in two.
	late []string
}

func newHumanView(out, errOut io.Writer, quiet bool, records func(runID string) ([]agent.ToolCallRecord, error)) *humanView {
	return &humanView{
		out: out, errOut: errOut, quiet: quiet, records: records,
		streamed: map[int]*strings.Builder{}, called: map[string]bool{}, answered: map[string]bool{},
	}
}

func (v *humanView) write(s string) error {
	if s == "" {
		return nil
	}
	v.midLine = !strings.HasSuffix(s, "\n")
	if _, err := io.WriteString(v.out, s); err != nil {
		return err
	}
	if v.midLine || len(v.late) == 0 {
		return nil
	}
	late := v.late
	v.late = nil
	return v.writeErr(late)
}

func (v *humanView) writeErr(lines []string) error {
	for _, line := range lines {
		if _, err := io.WriteString(v.errOut, line); err != nil {
			return err
		}
	}
	return nil
}

// showLines shows lines of tool calls or results of the given step on
// errOut, each on a line of its own. Lines of a step earlier than the text
// being written wait for the end of its line: a broker with a topic per
// channel may bring them in the middle of the next step's text.
func (v *humanView) showLines(step int, lines ...string) error {
	if len(lines) == 0 {
		return nil
	}
	if v.midLine && step < v.textStep {
		v.late = append(v.late, lines...)
		return nil
	}
	if err := v.endLine(); err != nil {
		return err
	}
	return v.writeErr(lines)
}

// endLine ends a partly written line of out.
func (v *humanView) endLine() error {
	if !v.midLine {
		return nil
	}
	return v.write("\n")
}

// flushCalls shows the tool calls held back, on a line of their own.
func (v *humanView) flushCalls() error {
	if len(v.calls) == 0 {
		return nil
	}
	calls := v.calls
	v.calls = nil
	return v.showLines(v.callStep, calls...)
}

func callLine(name, args string) string {
	return fmt.Sprintf("→ %s %s\n", name, oneLine(compactJSON(args), lineWidth))
}

func resultLine(status string, r *tool.Result) string {
	return fmt.Sprintf("← %s\n", resultSummary(status, r))
}

func (v *humanView) show(ev agent.Event) error {
	if v.done {
		return nil // the answer is shown in full: late events add nothing
	}
	if ev.Kind == agent.EventOutput {
		v.done = true
	}
	if v.quiet {
		if ev.Kind == agent.EventOutput {
			return v.showOutput(ev.Output)
		}
		return nil
	}
	// Every event but a delta of the tool calls' step follows all of that
	// step's text.
	if ev.Kind != agent.EventToolCall && (ev.Kind != agent.EventDelta || ev.Step > v.callStep) {
		if err := v.flushCalls(); err != nil {
			return err
		}
	}
	switch ev.Kind {
	case agent.EventDelta:
		if ev.Delta.Text == "" {
			return nil
		}
		// The text of each model call starts on a line of its own.
		if ev.Step != v.textStep {
			if err := v.endLine(); err != nil {
				return err
			}
		}
		v.textStep = ev.Step
		b := v.streamed[ev.Step]
		if b == nil {
			b = &strings.Builder{}
			v.streamed[ev.Step] = b
		}
		b.WriteString(ev.Delta.Text)
		return v.write(ev.Delta.Text)
	case agent.EventToolCall:
		c := ev.ToolCall
		if v.called[c.ToolCallID] {
			return nil
		}
		if len(v.calls) > 0 && ev.Step != v.callStep {
			if err := v.flushCalls(); err != nil {
				return err
			}
		}
		v.called[c.ToolCallID] = true
		v.callStep = ev.Step
		v.calls = append(v.calls, callLine(c.ToolName, c.Arguments))
	case agent.EventToolResult:
		r := ev.ToolResult
		if v.answered[r.ToolCallID] {
			return nil
		}
		if r.Undispatched && !v.called[r.ToolCallID] {
			// A call never sent to a tool (an unknown tool, arguments over
			// the size limit) has no tool-call event: show it failed here.
			v.called[r.ToolCallID], v.answered[r.ToolCallID] = true, true
			return v.showLines(r.Step, "→ "+r.ToolName+"\n", resultLine(r.Status, r.Result))
		}
		if !v.called[r.ToolCallID] {
			// Its call has not come: the run's records show both at the end.
			v.unanswered = append(v.unanswered, r)
			return nil
		}
		v.answered[r.ToolCallID] = true
		return v.showLines(r.Step, resultLine(r.Status, r.Result))
	case agent.EventHook:
		// What a hook changed or stopped; what it let through is not news.
		var lines []string
		for _, d := range ev.Hook.Decisions {
			if d.Action == agent.HookDeny || d.Action == agent.HookTransform {
				line := fmt.Sprintf("⚑ %s: %s %s", d.Event, d.Hook, d.Action)
				if d.Reason != "" {
					line += ": " + d.Reason
				}
				lines = append(lines, oneLine(line, lineWidth)+"\n")
			}
		}
		return v.showLines(ev.Step, lines...)
	case agent.EventOutput:
		if err := v.showMissing(ev.RunID, ev.Output.Steps); err != nil {
			return err
		}
		return v.showOutput(ev.Output)
	}
	return nil
}

// showMissing shows the tool calls and results of the run that the stream
// did not bring before the output, as the run recorded them. They belong to
// steps before the last one, steps.
func (v *humanView) showMissing(runID string, steps int) error {
	var lines []string
	var records []agent.ToolCallRecord
	var err error
	if v.records != nil {
		records, err = v.records(runID)
	}
	if v.records == nil || err != nil {
		// Without the records, show the results held back as they are.
		for _, r := range v.unanswered {
			if !v.answered[r.ToolCallID] {
				v.answered[r.ToolCallID] = true
				lines = append(lines, resultLine(r.Status, r.Result))
			}
		}
	}
	for _, rec := range records {
		if !v.called[rec.ID] {
			v.called[rec.ID] = true
			lines = append(lines, callLine(rec.Name, rec.Arguments))
		}
		if !v.answered[rec.ID] {
			v.answered[rec.ID] = true
			lines = append(lines, resultLine(rec.Status, rec.Result))
		}
	}
	v.unanswered = nil
	return v.showLines(steps-1, lines...)
}

// showOutput shows the final answer, or, when its text was streamed, what
// the stream did not bring: a broker that does not order the deltas with
// the output (one with a topic per channel) may deliver the output before
// the last deltas, which are then dropped.
func (v *humanView) showOutput(out *agent.OutputEvent) error {
	if out.Status != agent.OutputComplete {
		return nil
	}
	var text string
	if err := json.Unmarshal(out.Content, &text); err != nil {
		text = string(out.Content)
	}
	if b := v.streamed[out.Steps]; b != nil && !v.quiet {
		streamed := b.String()
		if rest, ok := strings.CutPrefix(text, streamed); ok {
			return v.write(rest)
		}
		// The stream lost text in the middle: show the whole answer again.
	}
	if err := v.endLine(); err != nil {
		return err
	}
	return v.write(text)
}

func (v *humanView) close() error {
	if err := v.flushCalls(); err != nil {
		return err
	}
	if err := v.endLine(); err != nil {
		return err
	}
	late := v.late
	v.late = nil
	return v.writeErr(late)
}

// resultSummary describes a tool result in one line: its text when it is
// one line, else its number of lines.
func resultSummary(status string, r *tool.Result) string {
	var text string
	if r != nil {
		text = r.Text()
		if text == "" && len(r.Structured) > 0 {
			text = compactJSON(string(r.Structured))
		}
	}
	text = strings.TrimRight(text, "\r\n")
	switch {
	case status == agent.StatusError:
		return oneLine("error: "+text, lineWidth)
	case text == "":
		return "(empty)"
	case strings.Contains(text, "\n"):
		return fmt.Sprintf("%d lines", strings.Count(text, "\n")+1)
	}
	return oneLine(text, lineWidth)
}

// compactJSON returns s without insignificant white space when it is JSON,
// else s.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// oneLine returns s on one line (line breaks and tabs become spaces) and
// cut to at most width runes, ending in "…" when cut.
func oneLine(s string, width int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	runes := []rune(s)
	return string(runes[:width-1]) + "…"
}

// jsonView prints every event as one line of JSON.
type jsonView struct {
	enc *json.Encoder
}

func newJSONView(out io.Writer) *jsonView {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return &jsonView{enc: enc}
}

// jsonEvent is the line --json prints for an event. Data is the event's
// payload as it travelled on the broker, described in docs/channels.md.
type jsonEvent struct {
	Kind      agent.EventKind `json:"kind"`
	Agent     string          `json:"agent"`
	RunID     string          `json:"run_id"`
	SessionID string          `json:"session_id,omitempty"`
	Step      int             `json:"step"`
	ID        string          `json:"id,omitempty"`
	Channel   string          `json:"channel,omitempty"`
	Time      *time.Time      `json:"time,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

func (v *jsonView) show(ev agent.Event) error {
	line := jsonEvent{Kind: ev.Kind, Agent: ev.Agent, RunID: ev.RunID, Step: ev.Step}
	if m := ev.Message; m != nil {
		line.SessionID, line.ID, line.Channel, line.Data = m.Metadata.SessionID, m.ID, m.Channel, m.Data
		if !m.Metadata.Time.IsZero() {
			t := m.Metadata.Time
			line.Time = &t
		}
	}
	return v.enc.Encode(line)
}

func (v *jsonView) close() error { return nil }

// jsonLines writes each item as a line of JSON, for the --json listings.
func jsonLines[T any](out io.Writer, items []T) error {
	enc := json.NewEncoder(out)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}
