package agent_test

import (
	"strings"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// FuzzDecodeEvent decodes arbitrary messages on arbitrary channels as
// agent events: never a panic; an event it returns has the kind of its
// channel, the payload of that kind, the agent of the channel and the
// message it came from.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []struct{ channel, data string }{
		{"calf.agent.calc.input", `{"prompt":"add 2 and 3","instructions":"Add."}`},
		{"calf.agent.calc.inference", `{"step":1}`},
		{"calf.agent.calc.stream", `{"step":1,"delta":{"text":"5"}}`},
		{"calf.agent.calc.tool_call", `{"step":1,"tool_call_id":"c1","tool_name":"add","arguments":"{\"a\":2,\"b\":3}"}`},
		{"calf.agent.calc.tool_result", `{"step":1,"tool_call_id":"c1","tool_name":"add","status":"success","result":{"parts":[{"type":"text","text":"5"}]}}`},
		{"calf.agent.calc.output", `{"status":"complete","output":"5","steps":2,"usage":{"input_tokens":70,"output_tokens":9}}`},
		{"calf.agent.calc.output", `{"status":"handoff","steps":1}`},
		{"calf.agent.writer.subagent_completed", `{"status":"complete","output":"done","agent":"writer","run_id":"r1/c1","ref":"{\"run\":\"r1\",\"step\":2,\"tool\":\"write\",\"call\":\"c1\"}"}`},
		{"calf.agent.writer.subagent_completed", `{"status":"complete","ref":""}`},
		{"calf.agent.calc.subagent_spawned", `{"step":2,"tool_call_id":"c1","tool_name":"write","agent":"writer","run_id":"r1/c1"}`},
		{"calf.agent.calc.approval", `{"id":"r1/c1","status":"pending","step":1,"tool_call_id":"c1","tool_name":"bash"}`},
		{"calf.agent.calc.hook", `{"event":"pre_tool_use","step":1,"decisions":[]}`},
		{"calf.agent.calc.pause", `{"step":1,"paused":true}`},
		{"calf.agent.calc.custom", `{"step":1,"name":"progress","data":{"n":1}}`},
		{"calf.agent.calc.context_compacted", `{"step":3,"upto":4}`},
		{"calf.agent.calc.unknown", `{}`},
		{"calf.agent", `{}`},
		{"other.channel", `null`},
		{"calf.agent.calc.tool_call", `{"step":"one"}`},
		{"calf.agent.calc.output", ``},
	} {
		f.Add(s.channel, []byte(s.data), "r1")
	}
	f.Fuzz(func(t *testing.T, channel string, data []byte, run string) {
		m := &calf.Message{ID: "m", Channel: channel, Data: data, Metadata: calf.Metadata{RunID: run}}
		ev, err := agent.DecodeEvent(m)
		if err != nil {
			return
		}
		if ev.Message != m {
			t.Fatal("the event does not carry its message")
		}
		name, rest, _ := strings.Cut(strings.TrimPrefix(channel, "calf.agent."), ".")
		kind, _, _ := strings.Cut(rest, ".")
		if kind == "stream" {
			kind = string(agent.EventDelta) // the channel of the deltas
		}
		if ev.Agent != name {
			t.Errorf("agent %q, the channel's is %q", ev.Agent, name)
		}
		var payload bool
		switch ev.Kind {
		case agent.EventInput:
			payload = ev.Input != nil
		case agent.EventInference:
			payload = true
		case agent.EventDelta:
			payload = ev.Delta != nil
		case agent.EventToolCall:
			payload = ev.ToolCall != nil && ev.Step == ev.ToolCall.Step
		case agent.EventToolResult:
			payload = ev.ToolResult != nil && ev.Step == ev.ToolResult.Step
		case agent.EventOutput:
			payload = ev.Output != nil && ev.Output.Status != agent.OutputHandoff
		case agent.EventHandoff:
			payload = ev.Output != nil && ev.Output.Status == agent.OutputHandoff
			kind = string(agent.EventHandoff)
		case agent.EventSubagentSpawned:
			payload = ev.Subagent != nil
		case agent.EventSubagentCompleted:
			payload = ev.Output != nil && ev.Subagent != nil && ev.Subagent.Step == ev.Step
		case agent.EventApproval:
			payload = ev.Approval != nil
		case agent.EventHook:
			payload = ev.Hook != nil
		case agent.EventContextCompacted:
			payload = ev.Compacted != nil
		case agent.EventPause:
			payload = ev.Pause != nil
		case agent.EventCustom:
			payload = ev.Custom != nil
		}
		if !payload {
			t.Fatalf("event of kind %q without its payload: %+v", ev.Kind, ev)
		}
		if string(ev.Kind) != kind {
			t.Errorf("event of kind %q on channel %s", ev.Kind, channel)
		}
	})
}
