package agent

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStreamOrder feeds events in orders an observer can see them (a tool
// call travels under its own key) and checks that they come out in causal
// order.
func TestStreamOrder(t *testing.T) {
	in := func(step int) Event { return Event{Kind: EventInference, Step: step} }
	call := func(step int, id string) Event {
		return Event{Kind: EventToolCall, Step: step, ToolCall: &ToolCallEvent{Step: step, ToolCallID: id, ToolName: "add"}}
	}
	result := func(step int, id, tool string) Event {
		return Event{Kind: EventToolResult, Step: step, ToolResult: &ToolResultEvent{Step: step, ToolCallID: id, ToolName: tool, Undispatched: tool != "add"}}
	}
	output := Event{Kind: EventOutput}
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
		{"output waits for the last call", []Event{in(1), call(1, "c1"), result(1, "c1", "add"), in(2), result(2, "c2", "add"), in(3), output, call(2, "c2")},
			[]string{"inference 1", "call c1", "result c1", "inference 2", "call c2", "result c2", "inference 3", "output 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &streamOrder{called: map[string]bool{}}
			var got []string
			for _, ev := range tt.in {
				for _, e := range o.add(ev) {
					got = append(got, name(e))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}
