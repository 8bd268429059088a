package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// Events for the view tests: a run whose step 1 says "Let me look." and
// calls read_file, and whose step 2 answers "Done.".
func delta(step int, text string) agent.Event {
	return agent.Event{Kind: agent.EventDelta, RunID: "r", Step: step, Delta: &model.Delta{Text: text}}
}

var (
	evCall = agent.Event{Kind: agent.EventToolCall, RunID: "r", Step: 1, ToolCall: &agent.ToolCallEvent{
		Step: 1, ToolCallID: "c1", ToolName: "read_file", Arguments: `{"path": "a.txt"}`,
	}}
	evResult = agent.Event{Kind: agent.EventToolResult, RunID: "r", Step: 1, ToolResult: &agent.ToolResultEvent{
		Step: 1, ToolCallID: "c1", ToolName: "read_file", Status: agent.StatusSuccess, Result: tool.TextResult("one\ntwo\n"),
	}}
	evInference2 = agent.Event{Kind: agent.EventInference, RunID: "r", Step: 2}
	evOutput     = agent.Event{Kind: agent.EventOutput, RunID: "r", Step: 2, Output: &agent.OutputEvent{
		Status: agent.OutputComplete, Content: json.RawMessage(`"Done."`), Steps: 2,
	}}
	record = agent.ToolCallRecord{Step: 1, ID: "c1", Name: "read_file", Arguments: `{"path": "a.txt"}`,
		Status: agent.StatusSuccess, Result: tool.TextResult("one\ntwo\n")}
)

func TestHumanView(t *testing.T) {
	t.Parallel()
	const (
		wantOut = "Let me look.\nDone.\n"
		wantErr = "→ read_file {\"path\":\"a.txt\"}\n← 2 lines\n"
	)
	records := func(string) ([]agent.ToolCallRecord, error) { return []agent.ToolCallRecord{record}, nil }
	noRecords := func(string) ([]agent.ToolCallRecord, error) { return nil, errors.New("store closed") }
	for _, tc := range []struct {
		name             string
		quiet            bool
		records          func(string) ([]agent.ToolCallRecord, error)
		events           []agent.Event
		wantOut, wantErr string
	}{
		{
			name:    "in order",
			events:  []agent.Event{delta(1, "Let"), delta(1, " me look."), evCall, evResult, evInference2, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call before the end of its step's text",
			events:  []agent.Event{delta(1, "Let"), evCall, delta(1, " me look."), evResult, evInference2, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call and result after the next step's text",
			events:  []agent.Event{delta(1, "Let me look."), evInference2, delta(2, "Done."), evCall, evResult, evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call and result in the middle of the next step's text",
			events:  []agent.Event{delta(1, "Let me look."), evInference2, delta(2, "Do"), evCall, evResult, delta(2, "ne."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "result in the middle of the next step's text",
			events:  []agent.Event{delta(1, "Let me look."), evCall, evInference2, delta(2, "Do"), evResult, delta(2, "ne."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call and result never streamed, output before the last delta",
			records: records,
			events:  []agent.Event{delta(1, "Let me look."), evInference2, delta(2, "Do"), evOutput, delta(2, "ne.")},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call never streamed",
			records: records,
			events:  []agent.Event{delta(1, "Let me look."), evResult, evInference2, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call and result never streamed",
			records: records,
			events:  []agent.Event{delta(1, "Let me look."), evInference2, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "call never streamed, records unreadable",
			records: noRecords,
			events:  []agent.Event{delta(1, "Let me look."), evResult, evInference2, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: "← 2 lines\n",
		},
		{
			name:    "duplicates",
			events:  []agent.Event{delta(1, "Let me look."), evCall, evCall, evResult, evResult, delta(2, "Done."), evOutput},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "output before the last delta",
			events:  []agent.Event{delta(1, "Let me look."), evCall, evResult, evInference2, delta(2, "Do"), evOutput, delta(2, "ne.")},
			wantOut: wantOut, wantErr: wantErr,
		},
		{
			name:    "a delta lost in the middle",
			events:  []agent.Event{delta(1, "Let me look."), evCall, evResult, evInference2, delta(2, "D"), delta(2, "."), evOutput},
			wantOut: "Let me look.\nD.\nDone.\n", wantErr: wantErr,
		},
		{
			name:    "answer not streamed",
			events:  []agent.Event{evOutput},
			wantOut: "Done.\n",
		},
		{
			name:    "quiet",
			quiet:   true,
			records: records,
			events:  []agent.Event{delta(1, "Let me look."), evCall, evResult, evInference2, delta(2, "Done."), evOutput},
			wantOut: "Done.\n",
		},
		{
			name: "failed run",
			events: []agent.Event{delta(1, "Let me"), {Kind: agent.EventOutput, RunID: "r", Output: &agent.OutputEvent{
				Status: agent.OutputFailed, Error: "model: timed out", Steps: 1,
			}}},
			wantOut: "Let me\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			v := newHumanView(&out, &errOut, tc.quiet, tc.records)
			for _, ev := range tc.events {
				if err := v.show(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := v.close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResultSummary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 150)
	for _, tc := range []struct {
		name   string
		status string
		result *tool.Result
		want   string
	}{
		{"one line", agent.StatusSuccess, tool.TextResult("42\n"), "42"},
		{"lines", agent.StatusSuccess, tool.TextResult("a\nb\nc"), "3 lines"},
		{"long line", agent.StatusSuccess, tool.TextResult(long), strings.Repeat("x", 99) + "…"},
		{"empty", agent.StatusSuccess, tool.TextResult(""), "(empty)"},
		{"none", agent.StatusSuccess, nil, "(empty)"},
		{"structured", agent.StatusSuccess, &tool.Result{Structured: json.RawMessage(`{ "a": 1 }`)}, `{"a":1}`},
		{"error", agent.StatusError, tool.TextResult("\"x.txt\": file does not exist\nmore"), `error: "x.txt": file does not exist more`},
	} {
		if got := resultSummary(tc.status, tc.result); got != tc.want {
			t.Errorf("%s: resultSummary = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"a\tb\n  c", 10, "a b c"},
		{"héllo wörld", 5, "héll…"},
		{"exactly", 7, "exactly"},
	} {
		if got := oneLine(tc.in, tc.width); got != tc.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
}

// A call of a tool the agent does not have has no tool-call event, only an
// undispatched error result: it is shown where it happened, as a failed
// call, before the answer.
func TestHumanViewUnknownTool(t *testing.T) {
	t.Parallel()
	const unknown = `unknown tool "nosuch"; this agent has no tools`
	evUnknown := agent.Event{Kind: agent.EventToolResult, RunID: "r", Step: 1, ToolResult: &agent.ToolResultEvent{
		Step: 1, ToolCallID: "c9", ToolName: "nosuch", Status: agent.StatusError, Result: tool.ErrorResult(errors.New(unknown)),
		Undispatched: true,
	}}
	rec := agent.ToolCallRecord{Step: 1, ID: "c9", Name: "nosuch", Arguments: `{"x": 1}`,
		Status: agent.StatusError, Result: tool.ErrorResult(errors.New(unknown))}
	records := func(string) ([]agent.ToolCallRecord, error) { return []agent.ToolCallRecord{rec}, nil }
	const want = "Let me look.\n→ nosuch\n← error: " + unknown + "\nDone.\n"
	for _, tc := range []struct {
		name    string
		records func(string) ([]agent.ToolCallRecord, error)
		events  []agent.Event
	}{
		{"with records", records, []agent.Event{delta(1, "Let me look."), evUnknown, evInference2, delta(2, "Done."), evOutput}},
		{"without records", nil, []agent.Event{delta(1, "Let me look."), evUnknown, evInference2, delta(2, "Done."), evOutput}},
		{"twice", records, []agent.Event{delta(1, "Let me look."), evUnknown, evUnknown, evInference2, delta(2, "Done."), evOutput}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One writer for both, as in calf chat and a terminal: the order
			// of the answer and the tool lines is what is shown.
			var out bytes.Buffer
			v := newHumanView(&out, &out, false, tc.records)
			for _, ev := range tc.events {
				if err := v.show(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := v.close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
