package oaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Request is a chat completions request.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
}

// StreamOptions are the options of a streamed request.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is a message of a request.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content,omitzero"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Content is the content of a request message: absent or null, a string,
// or an array of parts.
type Content struct {
	// Text is the content when it is a string.
	Text *string
	// Parts is the content when it is an array; it is used when Text is nil.
	Parts []Part
}

// TextContent returns string content.
func TextContent(s string) Content { return Content{Text: &s} }

// PartsContent returns array content.
func PartsContent(parts []Part) Content {
	if parts == nil {
		parts = []Part{}
	}
	return Content{Parts: parts}
}

// IsZero reports whether c is absent.
func (c Content) IsZero() bool { return c.Text == nil && c.Parts == nil }

// MarshalJSON encodes c as a string, an array of parts, or null.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Text != nil:
		return json.Marshal(*c.Text)
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	default:
		return []byte("null"), nil
	}
}

// UnmarshalJSON decodes null, a string or an array of parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = Content{}
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.Text = &s
		return nil
	default:
		var parts []Part
		if err := json.Unmarshal(b, &parts); err != nil {
			return fmt.Errorf("content: %v", err)
		}
		c.Parts = PartsContent(parts).Parts
		return nil
	}
}

// Part is a part of array content: text or an image.
type Part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is the image of an image_url part: a URL or a data URL.
type ImageURL struct {
	URL string `json:"url"`
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Type: "text", Text: s} }

// ImagePart returns an image_url part.
func ImagePart(url string) Part { return Part{Type: "image_url", ImageURL: &ImageURL{URL: url}} }

// ToolCall is a tool call of an assistant message, or a piece of one in a
// stream chunk, where Index says which call it belongs to.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function and arguments of a tool call.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is a tool the model may call.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes a function tool.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat asks for output in a format, such as JSON that matches a
// schema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the schema of a json_schema response format.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// Tool choice modes.
var (
	toolChoiceAuto     = json.RawMessage(`"auto"`)
	toolChoiceNone     = json.RawMessage(`"none"`)
	toolChoiceRequired = json.RawMessage(`"required"`)
)

// ToolChoiceMode returns the tool_choice value for "auto", "none" or
// "required".
func ToolChoiceMode(mode string) json.RawMessage {
	switch mode {
	case "auto":
		return toolChoiceAuto
	case "none":
		return toolChoiceNone
	case "required":
		return toolChoiceRequired
	}
	b, _ := json.Marshal(mode)
	return b
}

// namedToolChoice is the tool_choice value that names a function.
type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// NamedToolChoice returns the tool_choice value that requires the function
// name.
func NamedToolChoice(name string) json.RawMessage {
	c := namedToolChoice{Type: "function"}
	c.Function.Name = name
	b, _ := json.Marshal(c)
	return b
}

// ErrToolChoice reports a tool_choice value that is neither a mode nor a
// named function.
var ErrToolChoice = errors.New("oaiwire: invalid tool_choice")

// DecodeToolChoice decodes a tool_choice value. It returns the mode
// ("auto", "none" or "required") or the function name, and named says
// which. An absent or null value gives "".
func DecodeToolChoice(raw json.RawMessage) (choice string, named bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		switch s {
		case "auto", "none", "required":
			return s, false, nil
		}
		return "", false, fmt.Errorf("%w: unsupported value %q", ErrToolChoice, s)
	}
	var c namedToolChoice
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", false, err
	}
	if c.Type != "function" || c.Function.Name == "" {
		return "", false, fmt.Errorf("%w: want a function with a name", ErrToolChoice)
	}
	return c.Function.Name, true, nil
}

// Completion is a chat completion, or a chunk of a streamed one.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is a choice of a completion. A completion's choice has a
// Message; a chunk's has a Delta.
type Choice struct {
	Index        int         `json:"index"`
	Message      *OutMessage `json:"message,omitempty"`
	Delta        *Delta      `json:"delta,omitempty"`
	FinishReason *string     `json:"finish_reason"`
}

// OutMessage is the message of a completion's choice.
type OutMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Delta is the piece of the message in a chunk's choice.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Usage counts the tokens of a completion.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Error is the body of an error response.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the error object of an error response.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// EncodeRequest returns the JSON body of r.
func EncodeRequest(r *Request) ([]byte, error) {
	return json.Marshal(r)
}

// DecodeRequest decodes a request body.
func DecodeRequest(body []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// EncodeCompletion returns the JSON body of c.
func EncodeCompletion(c *Completion) ([]byte, error) {
	return json.Marshal(c)
}

// DecodeCompletion decodes a completion body.
func DecodeCompletion(body []byte) (*Completion, error) {
	var c Completion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
