package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Model generates the next assistant message for a conversation.
type Model interface {
	// Name identifies the model, such as "openai:gpt-4o-mini".
	Name() string
	// Generate returns the model's complete response.
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Streamer is implemented by models that can stream their response. The
// sequence yields deltas as they arrive; its last chunk carries the
// complete [Response]. Code that streams should fall back to Generate for
// a model that does not implement it (see [Stream]).
type Streamer interface {
	GenerateStream(ctx context.Context, req *Request) iter.Seq2[Chunk, error]
}

// Stream streams req from m, or, for a model that does not stream, yields
// its whole response as one text delta followed by the response.
func Stream(ctx context.Context, m Model, req *Request) iter.Seq2[Chunk, error] {
	if s, ok := m.(Streamer); ok {
		return s.GenerateStream(ctx, req)
	}
	return func(yield func(Chunk, error) bool) {
		resp, err := m.Generate(ctx, req)
		if err != nil {
			yield(Chunk{}, err)
			return
		}
		if t := resp.Message.Text(); t != "" {
			if !yield(Chunk{Delta: &Delta{Text: t}}, nil) {
				return
			}
		}
		yield(Chunk{Response: resp}, nil)
	}
}

// Role is the author of a message.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation.
type Message struct {
	Role Role `json:"role"`
	// Parts is the content: text and images.
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolName is the tool a tool message answers for.
	ToolName string `json:"tool_name,omitempty"`
	// IsError marks a tool message that reports a failure.
	IsError bool `json:"is_error,omitempty"`
}

// Clone returns a copy of m that shares no memory with it that either
// could change: its parts, their data and its tool calls are copied.
func (m Message) Clone() Message {
	if m.Parts != nil {
		parts := make([]Part, len(m.Parts))
		for i, p := range m.Parts {
			p.Data = bytes.Clone(p.Data)
			parts[i] = p
		}
		m.Parts = parts
	}
	m.ToolCalls = slices.Clone(m.ToolCalls)
	return m
}

// CloneMessages returns a copy of ms whose messages are cloned
// ([Message.Clone]), or nil for nil.
func CloneMessages(ms []Message) []Message {
	if ms == nil {
		return nil
	}
	c := make([]Message, len(ms))
	for i, m := range ms {
		c[i] = m.Clone()
	}
	return c
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// UserMessage returns a user message with one text part.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Parts: []Part{TextPart(text)}}
}

// SystemMessage returns a system message with one text part.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Parts: []Part{TextPart(text)}}
}

// AssistantMessage returns an assistant message with one text part.
func AssistantMessage(text string) Message {
	return Message{Role: RoleAssistant, Parts: []Part{TextPart(text)}}
}

// PartType is the kind of a [Part].
type PartType string

// Part types.
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
)

// Part is a piece of message content.
type Part struct {
	Type PartType `json:"type"`
	// Text is the text of a text part.
	Text string `json:"text,omitempty"`
	// URL locates an image part: an http(s) URL or a data URL.
	URL string `json:"url,omitempty"`
	// MIMEType is the media type of an image given as Data.
	MIMEType string `json:"mime_type,omitempty"`
	// Data is the content of an image part given inline.
	Data []byte `json:"data,omitempty"`
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Type: PartText, Text: s} }

// ImagePart returns an image part with inline data.
func ImagePart(mimeType string, data []byte) Part {
	return Part{Type: PartImage, MIMEType: mimeType, Data: data}
}

// ImageURLPart returns an image part that refers to a URL.
func ImageURLPart(url string) Part { return Part{Type: PartImage, URL: url} }

// ToolCall is one call of a tool requested by the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments exactly as the model sent
	// it; it may be malformed.
	Arguments string `json:"arguments"`
}

// ToolDefinition describes a tool to the model.
type ToolDefinition struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage `json:"parameters"`
}

// OpenAIFormat returns the definition in OpenAI's function-calling format:
// {"type":"function","function":{"name":...,"description":...,"parameters":...}}.
func (d ToolDefinition) OpenAIFormat() map[string]any {
	fn := map[string]any{"name": d.Name, "parameters": d.Parameters}
	if d.Description != "" {
		fn["description"] = d.Description
	}
	return map[string]any{"type": "function", "function": fn}
}

// ToolChoice says whether and which tool the model must call: "" or "auto"
// (the model decides), "none", "required", or the name of one tool.
type ToolChoice string

// Tool choices.
const (
	ToolChoiceAuto     ToolChoice = "auto"
	ToolChoiceNone     ToolChoice = "none"
	ToolChoiceRequired ToolChoice = "required"
)

// OutputSchema asks the model for a JSON response that follows a schema.
type OutputSchema struct {
	// Name names the schema (OpenAI requires one).
	Name string `json:"name"`
	// Schema is the JSON Schema of the response.
	Schema json.RawMessage `json:"schema"`
	// Strict asks the provider to enforce the schema, where it can.
	Strict bool `json:"strict,omitempty"`
}

// Request is what a model is asked.
type Request struct {
	// Messages is the conversation, system messages first.
	Messages []Message `json:"messages"`
	// Tools the model may call.
	Tools []ToolDefinition `json:"tools,omitempty"`
	// ToolChoice constrains tool calling; empty means auto.
	ToolChoice ToolChoice `json:"tool_choice,omitempty"`
	// Output, when set, asks for JSON following a schema.
	Output *OutputSchema `json:"output,omitempty"`
	// Temperature, when set, overrides the model's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens, when positive, bounds the response length.
	MaxTokens int `json:"max_tokens,omitempty"`
	// ParallelToolCalls, when set, allows or forbids several tool calls in
	// one response.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// FinishReason says why the model stopped.
type FinishReason string

// Finish reasons.
const (
	FinishStop          FinishReason = "stop"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishLength        FinishReason = "length"
	FinishContentFilter FinishReason = "content_filter"
	FinishOther         FinishReason = "other"
)

// Usage counts tokens and requests.
type Usage struct {
	Requests    int64 `json:"requests,omitempty"`
	InputTokens int64 `json:"input_tokens,omitempty"`
	// CachedInputTokens are the input tokens the provider served from its
	// prompt cache, counted in InputTokens too.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	OutputTokens      int64 `json:"output_tokens,omitempty"`
	TotalTokens       int64 `json:"total_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Requests:          u.Requests + v.Requests,
		InputTokens:       u.InputTokens + v.InputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		TotalTokens:       u.TotalTokens + v.TotalTokens,
	}
}

// Response is a model's answer.
type Response struct {
	// Message is the assistant message, with its tool calls.
	Message      Message      `json:"message"`
	FinishReason FinishReason `json:"finish_reason,omitempty"`
	Usage        Usage        `json:"usage"`
	// Model is the model that answered, as the provider names it.
	Model string `json:"model,omitempty"`
	// ID is the provider's response id.
	ID string `json:"id,omitempty"`
}

// Chunk is one element of a streamed response: a delta while the response
// is generated, and the complete response last.
type Chunk struct {
	Delta    *Delta    `json:"delta,omitempty"`
	Response *Response `json:"response,omitempty"`
}

// Delta is an increment of a streamed response.
type Delta struct {
	// Text is more of the assistant's text.
	Text string `json:"text,omitempty"`
	// ToolCall is more of a tool call.
	ToolCall *ToolCallDelta `json:"tool_call,omitempty"`
}

// ToolCallDelta is an increment of one tool call. Index identifies the call
// within the response; ID and Name arrive with its first delta, Arguments
// in pieces.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Errors of the model contract.
var (
	// ErrNoModel is returned when no model is configured.
	ErrNoModel = errors.New("model: no model configured")
	// ErrTimeout matches a model call that did not answer in time.
	ErrTimeout = errors.New("model: timed out")
)

// StatusError is an HTTP error from a model provider.
type StatusError struct {
	Provider   string
	StatusCode int
	Message    string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("model: %s returned HTTP %d: %s", e.Provider, e.StatusCode, e.Message)
}

// Retryable reports whether the request may succeed if sent again: rate
// limits (429), timeouts (408) and server errors (5xx).
func (e *StatusError) Retryable() bool {
	return e.StatusCode == 408 || e.StatusCode == 429 || e.StatusCode >= 500
}
