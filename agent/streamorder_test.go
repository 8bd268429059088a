package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/broker/memory"
)

// TestStreamOrder feeds events in orders an observer can see them (a tool
// call travels under its own key) and checks that they come out in causal
// order.
func TestStreamOrder(t *testing.T) {
	in := func(step int) Event { return Event{Kind: EventInference, Step: step} }
	call := func(step int, id string) Event {
		return Event{Kind: EventToolCall, Step: step, ToolCall: &ToolCallEvent{Step: step, ToolCallID: id, ToolName: "add"}}
	}
	// callAfter is a call of a step that streamed n deltas.
	callAfter := func(step, n int, id string) Event {
		ev := call(step, id)
		ev.ToolCall.Deltas = n
		return ev
	}
	delta := func(step int) Event { return Event{Kind: EventDelta, Step: step} }
	outputAfter := func(step, n int) Event {
		return Event{Kind: EventOutput, Step: step, Output: &OutputEvent{Steps: step, Deltas: n}}
	}
	result := func(step int, id, tool string) Event {
		return Event{Kind: EventToolResult, Step: step, ToolResult: &ToolResultEvent{Step: step, ToolCallID: id, ToolName: tool, Undispatched: tool != "add"}}
	}
	output := Event{Kind: EventOutput, Output: &OutputEvent{}}
	name := func(ev Event) string {
		switch ev.Kind {
		case EventToolCall:
			return "call " + ev.ToolCall.ToolCallID
		case EventToolResult:
			return "result " + ev.ToolResult.ToolCallID
		}
		return fmt.Sprintf("%s %d", ev.Kind, ev.Step)
	}
	tests := []struct {
		name string
		in   []Event
		want []string
	}{
		{"in order", []Event{in(1), call(1, "c1"), result(1, "c1", "add"), in(2), output},
			[]string{"inference 1", "call c1", "result c1", "inference 2", "output 0"}},
		{"result before its call", []Event{in(1), result(1, "c1", "add"), in(2), call(1, "c1"), output},
			[]string{"inference 1", "call c1", "result c1", "inference 2", "output 0"}},
		{"next step's call before the last result", []Event{in(1), call(1, "c1"), call(2, "c2"), result(1, "c1", "add"), in(2), result(2, "c2", "add"), in(3), output},
			[]string{"inference 1", "call c1", "result c1", "inference 2", "call c2", "result c2", "inference 3", "output 0"}},
		{"call before its inference", []Event{call(1, "c1"), in(1), result(1, "c1", "add"), output},
			[]string{"inference 1", "call c1", "result c1", "output 0"}},
		{"unknown tool has no call", []Event{in(1), result(1, "c1", "nope"), in(2), output},
			[]string{"inference 1", "result c1", "inference 2", "output 0"}},
		{"call before the deltas of its step", []Event{in(1), callAfter(1, 2, "c1"), delta(1), delta(1), result(1, "c1", "add"), in(2), output},
			[]string{"inference 1", "delta 1", "delta 1", "call c1", "result c1", "inference 2", "output 0"}},
		{"call and result before the deltas", []Event{in(1), callAfter(1, 2, "c1"), result(1, "c1", "add"), delta(1), delta(1), in(2), output},
			[]string{"inference 1", "delta 1", "delta 1", "call c1", "result c1", "inference 2", "output 0"}},
		{"call before its inference and deltas", []Event{callAfter(1, 1, "c1"), in(1), delta(1), result(1, "c1", "add"), output},
			[]string{"inference 1", "delta 1", "call c1", "result c1", "output 0"}},
		{"delta before its inference", []Event{delta(1), in(1), callAfter(1, 1, "c1"), result(1, "c1", "add"), output},
			[]string{"inference 1", "delta 1", "call c1", "result c1", "output 0"}},
		{"output before the deltas of its step", []Event{in(1), outputAfter(1, 2), delta(1), delta(1)},
			[]string{"inference 1", "delta 1", "delta 1", "output 1"}},
		{"output waits for the last call", []Event{in(1), call(1, "c1"), result(1, "c1", "add"), in(2), result(2, "c2", "add"), in(3), output, call(2, "c2")},
			[]string{"inference 1", "call c1", "result c1", "inference 2", "call c2", "result c2", "inference 3", "output 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := engine.NewStreamOrder(orderOf)
			var got []string
			for _, ev := range tt.in {
				for _, e := range o.Add(ev) {
					got = append(got, name(e))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamOrderFlush checks that a run's end with events held for a tool
// call that never comes makes the order report it, and that flushing
// yields every held event, the early calls first.
func TestStreamOrderFlush(t *testing.T) {
	c := newChainOrder("r1")
	evs := []Event{
		{Kind: EventInference, RunID: "r1", Step: 1},
		{Kind: EventToolResult, RunID: "r1", Step: 1, ToolResult: &ToolResultEvent{Step: 1, ToolCallID: "lost", ToolName: "add"}},
		{Kind: EventToolCall, RunID: "r1", Step: 3, ToolCall: &ToolCallEvent{Step: 3, ToolCallID: "early", ToolName: "add"}},
		{Kind: EventInference, RunID: "r1", Step: 2},
	}
	var got []EventKind
	for _, ev := range evs {
		for _, e := range c.Add(ev) {
			got = append(got, e.Kind)
		}
	}
	if c.Ended() {
		t.Fatal("ended before the output")
	}
	for _, e := range c.Add(Event{Kind: EventOutput, RunID: "r1", Output: &OutputEvent{Status: OutputComplete}}) {
		got = append(got, e.Kind)
	}
	if !c.Ended() {
		t.Fatal("not ended with the output held")
	}
	for _, e := range c.Flush() {
		got = append(got, e.Kind)
	}
	want := []EventKind{EventInference, EventToolCall, EventToolResult, EventInference, EventOutput}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if c.Ended() {
		t.Error("still ended after the flush")
	}
}

// TestChainOrderNextGivesUp checks that once a run has ended with events
// held, waiting for the next message gives up after engine.StreamEndGrace, and
// that it waits as long as its context otherwise.
func TestChainOrderNextGivesUp(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	cl := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = cl.Close() })
	f, err := cl.Follow(t.Context(), "x.y", "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := newChainOrder("r1")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx, f); errors.Is(err, engine.ErrEndGraceOver) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("next of a running stream = %v, want its context's deadline", err)
	}
	c.Add(Event{Kind: EventToolResult, RunID: "r1", Step: 1, ToolResult: &ToolResultEvent{Step: 1, ToolCallID: "lost", ToolName: "add"}})
	c.Add(Event{Kind: EventOutput, RunID: "r1", Output: &OutputEvent{Status: OutputComplete}})
	if _, err := c.Next(t.Context(), f); !errors.Is(err, engine.ErrEndGraceOver) {
		t.Errorf("next of an ended stream = %v, want ErrEndGraceOver", err)
	}
}
