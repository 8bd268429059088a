package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/calf-go/calf/model/internal/transport"
)

// FuzzStream feeds arbitrary event streams to the accumulator: it never
// panics, and a stream it completes gives a response whose tool calls
// match the deltas it yielded.
func FuzzStream(f *testing.F) {
	f.Add("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}   \n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	f.Add("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n")
	f.Add("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		events := transport.NewSSEReader(strings.NewReader(stream))
		var acc accumulator
		args := map[int]string{}
		for {
			ev, err := events.Next()
			if err != nil { // io.EOF, or a line too long
				return
			}
			d, done, err := acc.add(ev)
			if err != nil {
				return
			}
			if d != nil && d.ToolCall != nil {
				args[d.ToolCall.Index] += d.ToolCall.Arguments
			}
			if done {
				resp, err := acc.response()
				if err != nil {
					return
				}
				for i, c := range resp.Message.ToolCalls {
					if args[i] != "" && c.Arguments != args[i] {
						t.Fatalf("call %d: arguments %q; deltas %q", i, c.Arguments, args[i])
					}
				}
				return
			}
		}
	})
}

// FuzzResponse reads arbitrary answers as messages: never a panic.
func FuzzResponse(f *testing.F) {
	f.Add(`{"id":"m","type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"n","input":{"a":1}},{"type":"redacted_thinking","data":"d"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}`)
	f.Add(`{"type":"error","error":{"type":"api_error"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var w wireResponse
		if json.Unmarshal([]byte(body), &w) != nil {
			return
		}
		if resp, err := response(&w); err == nil && resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
			t.Fatalf("usage %+v", resp.Usage)
		}
	})
}
