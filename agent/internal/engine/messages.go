package engine

import (
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// UniqueCallIDs makes the ids of calls, the tool calls of step's response,
// unique within their run: the ids key the calls' records (and subagent
// runs), and some servers number the calls of each response from 0. A call
// keeps its id unless it is empty, longer than 128 bytes, or taken by a
// call of an earlier step (one of records, whose ids id returns) or one
// before it in calls; it is then "call_{step}_{i}" for the i-th call, with
// "_{k}" added while that is taken.
func UniqueCallIDs[R any](step int, calls []model.ToolCall, records []R, id func(R) string) {
	if len(calls) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, r := range records {
		seen[id(r)] = true
	}
	for i := range calls {
		c := &calls[i]
		if c.ID == "" || seen[c.ID] || len(c.ID) > 128 {
			c.ID = fmt.Sprintf("call_%d_%d", step, i)
			for k := 1; seen[c.ID]; k++ {
				c.ID = fmt.Sprintf("call_%d_%d_%d", step, i, k)
			}
		}
		seen[c.ID] = true
	}
}

// ToolMessage is the message that gives the model the result r of the
// tool call id of the tool name: its parts, or its structured result as
// text, or "(no output)".
func ToolMessage(id, name string, isError bool, r *tool.Result) model.Message {
	m := model.Message{Role: model.RoleTool, ToolCallID: id, ToolName: name, IsError: isError}
	if r != nil {
		m.Parts = r.Parts
		if len(m.Parts) == 0 && len(r.Structured) > 0 {
			m.Parts = []model.Part{model.TextPart(string(r.Structured))}
		}
	}
	if len(m.Parts) == 0 {
		m.Parts = []model.Part{model.TextPart("(no output)")}
	}
	return m
}

// TextOnly keeps only the user and assistant text of msgs, which it
// modifies: tool results, the tool calls of assistant messages and the
// assistant messages they leave empty are dropped (a handoff's TextOnly).
func TextOnly(msgs []model.Message) []model.Message {
	out := msgs[:0]
	for _, m := range msgs {
		switch {
		case m.Role == model.RoleTool:
			continue
		case m.Role == model.RoleAssistant && len(m.ToolCalls) > 0:
			m.ToolCalls = nil
			if m.Text() == "" {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// OutputText is a run's output as hooks see it: the text, or the JSON of
// a structured output.
func OutputText(out json.RawMessage) string {
	if len(out) == 0 {
		return ""
	}
	var text string
	if json.Unmarshal(out, &text) == nil {
		return text
	}
	return string(out)
}

// OnlyAnswers returns, of msgs (a run's own messages), its input (the
// messages before the first assistant message) and its answer (the last
// message, when it is the assistant's and makes no tool call).
func OnlyAnswers(msgs []model.Message) []model.Message {
	in := 0
	for in < len(msgs) && msgs[in].Role != model.RoleAssistant {
		in++
	}
	out := msgs[:in:in]
	if last := len(msgs) - 1; last >= in && msgs[last].Role == model.RoleAssistant && len(msgs[last].ToolCalls) == 0 {
		out = append(out, msgs[last])
	}
	return out
}
