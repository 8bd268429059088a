package modeltest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf/model"
)

// The OpenAI chat completions wire format, as far as the fake server
// understands it.

type wireRequest struct {
	Model               string              `json:"model"`
	Messages            []wireMessage       `json:"messages"`
	Tools               []wireTool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage     `json:"tool_choice,omitempty"`
	ResponseFormat      *wireResponseFormat `json:"response_format,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	MaxTokens           *int                `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int                `json:"max_completion_tokens,omitempty"`
	ParallelToolCalls   *bool               `json:"parallel_tool_calls,omitempty"`
	Stream              bool                `json:"stream,omitempty"`
	StreamOptions       *wireStreamOptions  `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
}

type wireToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function wireFunctionCall `json:"function"`
}

type wireFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type wireResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema,omitempty"`
		Strict bool            `json:"strict,omitempty"`
	} `json:"json_schema,omitempty"`
}

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int               `json:"index"`
	Message      *wireOutMessage   `json:"message,omitempty"`
	Delta        *wireDeltaMessage `json:"delta,omitempty"`
	FinishReason *string           `json:"finish_reason"`
}

type wireOutMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireDeltaMessage struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireUsage struct {
	PromptTokens        int64              `json:"prompt_tokens"`
	CompletionTokens    int64              `json:"completion_tokens"`
	TotalTokens         int64              `json:"total_tokens"`
	PromptTokensDetails *wirePromptDetails `json:"prompt_tokens_details,omitempty"`
}

type wirePromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errBadRequest marks a request the server cannot understand.
var errBadRequest = errors.New("invalid request")

// decodeRequest decodes a chat completions request body into the model
// name and the request it stands for.
func decodeRequest(body []byte) (*wireRequest, *model.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if w.Model == "" {
		return nil, nil, fmt.Errorf("%w: model is required", errBadRequest)
	}
	if len(w.Messages) == 0 {
		return nil, nil, fmt.Errorf("%w: messages must not be empty", errBadRequest)
	}
	req := &model.Request{
		Messages:          make([]model.Message, 0, len(w.Messages)),
		Temperature:       w.Temperature,
		ParallelToolCalls: w.ParallelToolCalls,
	}
	toolNames := map[string]string{}
	for i, wm := range w.Messages {
		m, err := decodeMessage(wm, toolNames)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: messages[%d]: %v", errBadRequest, i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	for i, t := range w.Tools {
		if t.Type != "function" {
			return nil, nil, fmt.Errorf("%w: tools[%d]: unsupported type %q", errBadRequest, i, t.Type)
		}
		req.Tools = append(req.Tools, model.ToolDefinition{
			Name:        t.Function.Name,
			Description: t.Function.Description,
			Parameters:  t.Function.Parameters,
		})
	}
	choice, err := decodeToolChoice(w.ToolChoice)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: tool_choice: %v", errBadRequest, err)
	}
	req.ToolChoice = choice
	if f := w.ResponseFormat; f != nil && f.Type == "json_schema" {
		if f.JSONSchema == nil {
			return nil, nil, fmt.Errorf("%w: response_format: json_schema is missing", errBadRequest)
		}
		req.Output = &model.OutputSchema{Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema, Strict: f.JSONSchema.Strict}
	}
	switch {
	case w.MaxCompletionTokens != nil:
		req.MaxTokens = *w.MaxCompletionTokens
	case w.MaxTokens != nil:
		req.MaxTokens = *w.MaxTokens
	}
	return &w, req, nil
}

// decodeMessage decodes one message. toolNames maps the ids of the tool
// calls seen so far to their tool names, so that a tool message gets the
// name of the tool it answers.
func decodeMessage(wm wireMessage, toolNames map[string]string) (model.Message, error) {
	var m model.Message
	switch wm.Role {
	case "system", "developer":
		m.Role = model.RoleSystem
	case "user":
		m.Role = model.RoleUser
	case "assistant":
		m.Role = model.RoleAssistant
	case "tool":
		m.Role = model.RoleTool
		if wm.ToolCallID == "" {
			return m, errors.New("tool message without tool_call_id")
		}
		m.ToolCallID = wm.ToolCallID
		m.ToolName = toolNames[wm.ToolCallID]
	default:
		return m, fmt.Errorf("unsupported role %q", wm.Role)
	}
	parts, err := decodeContent(wm.Content)
	if err != nil {
		return m, err
	}
	m.Parts = parts
	for _, c := range wm.ToolCalls {
		if m.Role != model.RoleAssistant {
			return m, errors.New("tool_calls outside an assistant message")
		}
		m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		toolNames[c.ID] = c.Function.Name
	}
	return m, nil
}

// decodeContent decodes message content: null, a string, or an array of
// text and image_url parts. Images given as base64 data URLs come back as
// inline data.
func decodeContent(raw json.RawMessage) ([]model.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []model.Part{model.TextPart(s)}, nil
	}
	var wps []wirePart
	if err := json.Unmarshal(raw, &wps); err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	parts := make([]model.Part, 0, len(wps))
	for _, p := range wps {
		switch p.Type {
		case "text":
			parts = append(parts, model.TextPart(p.Text))
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, errors.New("image_url part without url")
			}
			parts = append(parts, decodeImageURL(p.ImageURL.URL))
		default:
			return nil, fmt.Errorf("unsupported content part type %q", p.Type)
		}
	}
	return parts, nil
}

// decodeImageURL returns an image part for url, with inline data when url
// is a base64 data URL.
func decodeImageURL(url string) model.Part {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return model.ImageURLPart(url)
	}
	meta, data, ok := strings.Cut(rest, ",")
	mimeType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 {
		return model.ImageURLPart(url)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return model.ImageURLPart(url)
	}
	return model.ImagePart(mimeType, b)
}

func decodeToolChoice(raw json.RawMessage) (model.ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		switch c := model.ToolChoice(s); c {
		case model.ToolChoiceAuto, model.ToolChoiceNone, model.ToolChoiceRequired:
			return c, nil
		}
		return "", fmt.Errorf("unsupported value %q", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", err
	}
	if named.Type != "function" || named.Function.Name == "" {
		return "", errors.New("want a function with a name")
	}
	return model.ToolChoice(named.Function.Name), nil
}

// wireFinishReason returns the finish reason to send for resp.
func wireFinishReason(resp *model.Response) string {
	switch {
	case resp.FinishReason != "":
		return string(resp.FinishReason)
	case len(resp.Message.ToolCalls) > 0:
		return string(model.FinishToolCalls)
	default:
		return string(model.FinishStop)
	}
}

func wireUsageOf(u model.Usage) *wireUsage {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	w := &wireUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: total}
	if u.CachedInputTokens > 0 {
		w.PromptTokensDetails = &wirePromptDetails{CachedTokens: u.CachedInputTokens}
	}
	return w
}

// encodeCompletion returns the chat completion object for resp.
func encodeCompletion(id, modelName string, created int64, resp *model.Response) *wireCompletion {
	msg := &wireOutMessage{Role: "assistant"}
	if text := resp.Message.Text(); text != "" || len(resp.Message.ToolCalls) == 0 {
		msg.Content = &text
	}
	for _, c := range resp.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
			ID: c.ID, Type: "function", Function: wireFunctionCall{Name: c.Name, Arguments: c.Arguments},
		})
	}
	finish := wireFinishReason(resp)
	return &wireCompletion{
		ID:      id,
		Object:  "chat.completion",
		Created: created,
		Model:   modelName,
		Choices: []wireChoice{{Message: msg, FinishReason: &finish}},
		Usage:   wireUsageOf(resp.Usage),
	}
}

// encodeChunks returns the chunks of a streamed resp: the role, the text
// word by word, each tool call's index, id and name followed by its
// arguments in two pieces, the finish reason and, if includeUsage, the
// usage.
func encodeChunks(id, modelName string, created int64, resp *model.Response, includeUsage bool) []*wireCompletion {
	chunk := func(d *wireDeltaMessage, finish *string) *wireCompletion {
		return &wireCompletion{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: modelName,
			Choices: []wireChoice{{Delta: d, FinishReason: finish}},
		}
	}
	empty := ""
	chunks := []*wireCompletion{chunk(&wireDeltaMessage{Role: "assistant", Content: &empty}, nil)}
	for _, w := range splitWords(resp.Message.Text()) {
		chunks = append(chunks, chunk(&wireDeltaMessage{Content: &w}, nil))
	}
	for i, c := range resp.Message.ToolCalls {
		chunks = append(chunks, chunk(&wireDeltaMessage{ToolCalls: []wireToolCall{{
			Index: &i, ID: c.ID, Type: "function", Function: wireFunctionCall{Name: c.Name},
		}}}, nil))
		for _, a := range splitHalves(c.Arguments) {
			chunks = append(chunks, chunk(&wireDeltaMessage{ToolCalls: []wireToolCall{{
				Index: &i, Function: wireFunctionCall{Arguments: a},
			}}}, nil))
		}
	}
	finish := wireFinishReason(resp)
	chunks = append(chunks, chunk(&wireDeltaMessage{}, &finish))
	if includeUsage {
		chunks = append(chunks, &wireCompletion{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: modelName,
			Choices: []wireChoice{}, Usage: wireUsageOf(resp.Usage),
		})
	}
	return chunks
}
