package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/calf-go/calf/model"
)

// request converts req into the body of a chat completion request.
func (m *Model) request(req *model.Request) (*wireRequest, error) {
	p := &wireRequest{Model: m.ep.wireModel, ReasoningEffort: m.effort}
	msgs, err := messages(model.ForProvider(req.Messages, "openai"), m.sendReasoning)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	p.Messages = msgs
	if len(req.Tools) > 0 {
		p.Tools = make([]wireTool, len(req.Tools))
		for i, t := range req.Tools {
			params, err := parameters(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("openai: tool %q: parameters: %w", t.Name, err)
			}
			p.Tools[i] = wireTool{Type: "function", Function: wireFunction{Name: t.Name, Description: t.Description, Parameters: params}}
		}
		// The API rejects parallel_tool_calls in a request without tools.
		p.ParallelToolCalls = req.ParallelToolCalls
	}
	switch c := req.ToolChoice; c {
	case "":
	case model.ToolChoiceAuto, model.ToolChoiceNone, model.ToolChoiceRequired:
		p.ToolChoice = json.RawMessage(`"` + string(c) + `"`)
	default:
		named, err := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": string(c)}})
		if err != nil {
			return nil, fmt.Errorf("openai: tool choice: %w", err)
		}
		p.ToolChoice = named
	}
	if o := req.Output; o != nil {
		name := o.Name
		if name == "" {
			name = "output"
		}
		p.ResponseFormat = &wireResponseFormat{Type: "json_schema", JSONSchema: &wireJSONSchema{Name: name, Schema: o.Schema, Strict: o.Strict}}
	}
	p.Temperature = req.Temperature
	if req.MaxTokens > 0 {
		if m.ep.completionTokens {
			p.MaxCompletionTokens = req.MaxTokens
		} else {
			p.MaxTokens = req.MaxTokens
		}
	}
	return p, nil
}

// parameters checks a tool's JSON Schema, which must be a JSON object. A
// missing schema stands for an object without properties. Only the first
// byte is looked at here: encoding the request checks that the schema is
// valid JSON, and so rejects a malformed one with a clear error.
func parameters(schema json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimLeft(schema, " \t\r\n")
	if len(trimmed) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("schema is %s, want a JSON object", kindOf(trimmed))
	}
	return schema, nil
}

// kindOf names the kind of the JSON value that data starts with.
func kindOf(data []byte) string {
	switch data[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "not an object"
	}
}

// messages converts the conversation. Images in tool messages, which the
// API does not accept there, move to a user message after the run of tool
// messages they belong to. Thinking parts are left out, except that with
// sendReasoning the shown reasoning of an assistant message with tool
// calls goes back as its reasoning_content. Thinking parts of the
// Responses API (which have an id) never go back here.
func messages(in []model.Message, sendReasoning bool) ([]wireMessage, error) {
	out := make([]wireMessage, 0, len(in))
	var toolImages []wirePart
	flush := func() {
		if len(toolImages) > 0 {
			out = append(out, wireMessage{Role: "user", Content: toolImages})
			toolImages = nil
		}
	}
	for i, msg := range in {
		if msg.Role != model.RoleTool {
			flush()
		}
		switch msg.Role {
		case model.RoleSystem:
			if hasImage(msg.Parts) {
				return nil, fmt.Errorf("messages[%d]: a system message cannot hold images", i)
			}
			out = append(out, wireMessage{Role: "system", Content: msg.Text()})
		case model.RoleUser:
			if !hasImage(msg.Parts) {
				out = append(out, wireMessage{Role: "user", Content: msg.Text()})
				continue
			}
			parts := make([]wirePart, 0, len(msg.Parts))
			for _, p := range msg.Parts {
				part, err := contentPart(p)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				parts = append(parts, part)
			}
			out = append(out, wireMessage{Role: "user", Content: parts})
		case model.RoleAssistant:
			if hasImage(msg.Parts) {
				return nil, fmt.Errorf("messages[%d]: an assistant message cannot hold images", i)
			}
			a := wireMessage{Role: "assistant"}
			if text := msg.Text(); text != "" || len(msg.ToolCalls) == 0 {
				a.Content = text
			}
			if len(msg.ToolCalls) > 0 {
				a.ToolCalls = make([]wireToolCall, len(msg.ToolCalls))
				for j, c := range msg.ToolCalls {
					a.ToolCalls[j] = wireToolCall{ID: c.ID, Type: "function", Function: wireFunctionCall{Name: c.Name, Arguments: c.Arguments}}
				}
				if sendReasoning {
					a.ReasoningContent = shownReasoning(msg.Parts)
				}
			}
			out = append(out, a)
		case model.RoleTool:
			text := msg.Text()
			if hasImage(msg.Parts) {
				if text == "" {
					text = "The result is the image in the next message."
				}
				toolImages = append(toolImages, wirePart{Type: "text", Text: "Images returned by tool call " + msg.ToolCallID + ":"})
				for _, p := range msg.Parts {
					if p.Type != model.PartImage {
						continue
					}
					part, err := contentPart(p)
					if err != nil {
						return nil, fmt.Errorf("messages[%d]: %w", i, err)
					}
					toolImages = append(toolImages, part)
				}
			}
			out = append(out, wireMessage{Role: "tool", Content: text, ToolCallID: msg.ToolCallID})
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
	}
	flush()
	return out, nil
}

// shownReasoning returns the text of the thinking parts that a chat
// completion gave (those without an id).
func shownReasoning(parts []model.Part) string {
	var s string
	for _, p := range parts {
		if p.Type == model.PartThinking && p.ID == "" {
			s += p.Text
		}
	}
	return s
}

func hasImage(parts []model.Part) bool {
	for _, p := range parts {
		if p.Type == model.PartImage {
			return true
		}
	}
	return false
}

// contentPart converts a text or image part. An image given inline becomes
// a base64 data URL.
func contentPart(p model.Part) (wirePart, error) {
	switch p.Type {
	case model.PartText:
		return wirePart{Type: "text", Text: p.Text}, nil
	case model.PartImage:
		url := p.URL
		if len(p.Data) > 0 {
			mimeType := p.MIMEType
			if mimeType == "" {
				mimeType = http.DetectContentType(p.Data)
			}
			url = "data:" + mimeType + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
		}
		if url == "" {
			return wirePart{}, fmt.Errorf("image part has neither URL nor data")
		}
		return wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: url}}, nil
	default:
		return wirePart{}, fmt.Errorf("unknown part type %q", p.Type)
	}
}

// response converts a chat completion: its first choice's message, finish
// reason and the usage.
func (m *Model) response(c *wireCompletion) (*model.Response, error) {
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w (model %s)", ErrEmptyResponse, m.ep.model)
	}
	choice := &c.Choices[0]
	msg := model.Message{Role: model.RoleAssistant}
	if thinking := choice.Message.thinking(); thinking != "" {
		msg.Parts = []model.Part{{Type: model.PartThinking, Text: thinking, Provider: "openai"}}
	}
	text := choice.Message.Content
	if text == "" {
		text = choice.Message.Refusal
	}
	if text != "" {
		msg.Parts = append(msg.Parts, model.TextPart(text))
	}
	for i, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; results still need one.
			id = "call_" + strconv.Itoa(i)
		}
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	// A server that answers in the shape of the deprecated functions API
	// sends one function_call: it is a tool call all the same.
	if fc := choice.Message.FunctionCall; fc != nil && fc.Name != "" && len(msg.ToolCalls) == 0 {
		msg.ToolCalls = []model.ToolCall{{ID: "call_0", Name: fc.Name, Arguments: fc.Arguments}}
	}
	var u wireUsage
	if c.Usage != nil {
		u = *c.Usage
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	var cached, reasoning int64
	if d := u.PromptTokensDetails; d != nil {
		cached = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		reasoning = d.ReasoningTokens
	}
	return &model.Response{
		Message:      msg,
		FinishReason: finishReason(choice.FinishReason, len(msg.ToolCalls) > 0),
		Usage: model.Usage{
			Requests:          1,
			InputTokens:       u.PromptTokens,
			CachedInputTokens: cached,
			OutputTokens:      u.CompletionTokens,
			ReasoningTokens:   reasoning,
			TotalTokens:       total,
		},
		Model: c.Model,
		ID:    c.ID,
	}, nil
}

// finishReason maps the API's finish reason. Servers that send none get
// one inferred from the message.
func finishReason(s string, toolCalls bool) model.FinishReason {
	switch strings.ToLower(s) {
	case "stop", "eos", "end_turn":
		return model.FinishStop
	case "tool_calls", "function_call":
		return model.FinishToolCalls
	case "length":
		return model.FinishLength
	case "content_filter":
		return model.FinishContentFilter
	case "":
		if toolCalls {
			return model.FinishToolCalls
		}
		return model.FinishStop
	default:
		return model.FinishOther
	}
}
