package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/calf-go/calf/model"
)

// params converts req into chat completion parameters.
func (m *Model) params(req *model.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: m.model}
	msgs, err := messages(req.Messages)
	if err != nil {
		return p, fmt.Errorf("openai: %w", err)
	}
	p.Messages = msgs
	if len(req.Tools) > 0 {
		p.Tools = make([]sdk.ChatCompletionToolUnionParam, len(req.Tools))
		for i, t := range req.Tools {
			fn := shared.FunctionDefinitionParam{Name: t.Name}
			if t.Description != "" {
				fn.Description = param.NewOpt(t.Description)
			}
			fn.Parameters, err = parameters(t.Parameters)
			if err != nil {
				return p, fmt.Errorf("openai: tool %q: parameters: %w", t.Name, err)
			}
			p.Tools[i] = sdk.ChatCompletionFunctionTool(fn)
		}
		if req.ParallelToolCalls != nil {
			// The API rejects parallel_tool_calls in a request without tools.
			p.ParallelToolCalls = param.NewOpt(*req.ParallelToolCalls)
		}
	}
	switch c := req.ToolChoice; c {
	case "":
	case model.ToolChoiceAuto, model.ToolChoiceNone, model.ToolChoiceRequired:
		p.ToolChoice.OfAuto = param.NewOpt(string(c))
	default:
		p.ToolChoice = sdk.ToolChoiceOptionFunctionToolChoice(sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: string(c)})
	}
	if o := req.Output; o != nil {
		name := o.Name
		if name == "" {
			name = "output"
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name}
		if len(o.Schema) > 0 {
			js.Schema = o.Schema
		}
		if o.Strict {
			js.Strict = param.NewOpt(true)
		}
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		if m.completionTokens {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	return p, nil
}

// parameters converts a tool's JSON Schema into the SDK's form. A missing
// schema stands for an object without properties.
func parameters(schema json.RawMessage) (shared.FunctionParameters, error) {
	if len(schema) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, err
	}
	out := make(shared.FunctionParameters, len(top))
	for k, v := range top {
		out[k] = v
	}
	return out, nil
}

// messages converts the conversation. Images in tool messages, which the
// API does not accept there, move to a user message after the run of tool
// messages they belong to.
func messages(in []model.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(in))
	var toolImages []sdk.ChatCompletionContentPartUnionParam
	flush := func() {
		if len(toolImages) > 0 {
			out = append(out, sdk.UserMessage(toolImages))
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
			out = append(out, sdk.SystemMessage(msg.Text()))
		case model.RoleUser:
			if !hasImage(msg.Parts) {
				out = append(out, sdk.UserMessage(msg.Text()))
				continue
			}
			parts := make([]sdk.ChatCompletionContentPartUnionParam, 0, len(msg.Parts))
			for _, p := range msg.Parts {
				part, err := contentPart(p)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				parts = append(parts, part)
			}
			out = append(out, sdk.UserMessage(parts))
		case model.RoleAssistant:
			if hasImage(msg.Parts) {
				return nil, fmt.Errorf("messages[%d]: an assistant message cannot hold images", i)
			}
			var a sdk.ChatCompletionAssistantMessageParam
			if text := msg.Text(); text != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(text)
			}
			for _, c := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
					},
				})
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case model.RoleTool:
			text := msg.Text()
			if hasImage(msg.Parts) {
				if text == "" {
					text = "The result is the image in the next message."
				}
				toolImages = append(toolImages, sdk.TextContentPart("Images returned by tool call "+msg.ToolCallID+":"))
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
			out = append(out, sdk.ToolMessage(text, msg.ToolCallID))
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
	}
	flush()
	return out, nil
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
func contentPart(p model.Part) (sdk.ChatCompletionContentPartUnionParam, error) {
	switch p.Type {
	case model.PartText:
		return sdk.TextContentPart(p.Text), nil
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
			return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("image part has neither URL nor data")
		}
		return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: url}), nil
	default:
		return sdk.ChatCompletionContentPartUnionParam{}, fmt.Errorf("unknown part type %q", p.Type)
	}
}

// response converts a chat completion: its first choice's message, finish
// reason and the usage.
func (m *Model) response(c *sdk.ChatCompletion) (*model.Response, error) {
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w (model %s)", ErrEmptyResponse, m.model)
	}
	choice := c.Choices[0]
	msg := model.Message{Role: model.RoleAssistant}
	text := choice.Message.Content
	if text == "" {
		text = choice.Message.Refusal
	}
	if text != "" {
		msg.Parts = []model.Part{model.TextPart(text)}
	}
	for i, tc := range choice.Message.ToolCalls {
		if tc.Type == "custom" {
			continue
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; results still need one.
			id = "call_" + strconv.Itoa(i)
		}
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	u := c.Usage
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &model.Response{
		Message:      msg,
		FinishReason: finishReason(choice.FinishReason, len(msg.ToolCalls) > 0),
		Usage: model.Usage{
			Requests:     1,
			InputTokens:  u.PromptTokens,
			OutputTokens: u.CompletionTokens,
			TotalTokens:  total,
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
