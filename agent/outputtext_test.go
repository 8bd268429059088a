package agent_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

func TestOutputEventText(t *testing.T) {
	for _, tt := range []struct {
		ev         agent.OutputEvent
		text, repr string
	}{
		{agent.OutputEvent{Status: agent.OutputComplete, Content: json.RawMessage(`"5"`)}, "5", "5"},
		{agent.OutputEvent{Status: agent.OutputComplete, Content: json.RawMessage(`"a \"quoted\"\nline"`)}, "a \"quoted\"\nline", "a \"quoted\"\nline"},
		{agent.OutputEvent{Status: agent.OutputComplete, Content: json.RawMessage(`{"sum":5}`)}, `{"sum":5}`, `{"sum":5}`},
		{agent.OutputEvent{Status: agent.OutputComplete, Content: json.RawMessage(`5`)}, `5`, `5`},
		{agent.OutputEvent{Status: agent.OutputComplete}, "", ""},
		{agent.OutputEvent{Status: agent.OutputFailed, Error: "the model failed"}, "", "error: the model failed"},
		{agent.OutputEvent{Status: agent.OutputCancelled}, "", "cancelled"},
		{agent.OutputEvent{Status: agent.OutputHandoff, Handoff: &agent.Hop{Agent: "billing", RunID: "r2"}}, "", "handoff to billing (run r2)"},
	} {
		if got := tt.ev.Text(); got != tt.text {
			t.Errorf("%+v: Text() = %q, want %q", tt.ev, got, tt.text)
		}
		if got := fmt.Sprint(tt.ev); got != tt.repr {
			t.Errorf("%+v: Sprint = %q, want %q", tt.ev, got, tt.repr)
		}
		if got := fmt.Sprint(&tt.ev); got != tt.repr {
			t.Errorf("%+v: Sprint of a pointer = %q, want %q", tt.ev, got, tt.repr)
		}
	}
}

func TestChannels(t *testing.T) {
	for got, want := range map[string]string{
		agent.InputChannel("calc"):           "calf.agent.calc.input",
		agent.ToolCallChannel("calc", "add"): "calf.agent.calc.tool_call.add",
		agent.StreamChannel("calc"):          "calf.agent.calc.stream",
		agent.OutputChannel("calc"):          "calf.agent.calc.output",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if !calf.MatchChannel(agent.AllChannels("calc"), agent.ToolCallChannel("calc", "add")) {
		t.Error("AllChannels does not match ToolCallChannel")
	}
}
