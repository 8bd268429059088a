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
	"time"
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

// SchemaChecker is implemented by models whose provider cannot take every
// JSON Schema (Gemini's schema dialect, for instance). agent.New and
// Agent.AddTool ask it about each tool's parameters and the agent's output
// schema, so that a schema the provider cannot express is an error when
// the agent is built, not a refused request at run time.
type SchemaChecker interface {
	// CheckSchema reports why the provider cannot take schema, or nil.
	CheckSchema(schema json.RawMessage) error
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
	if len(m.Parts) == 1 && m.Parts[0].Type == PartText {
		return m.Parts[0].Text // the usual case, without a copy
	}
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
	// PartThinking is the model's reasoning (Anthropic's extended
	// thinking, OpenAI's reasoning items, Gemini's thoughts): Text holds
	// what the provider shows of it, Signature and Opaque what it needs
	// back on the next turn. See [Part.Provider].
	PartThinking PartType = "thinking"
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
	// Signature is the provider's opaque signature of the part: the
	// signature of a thinking block (Anthropic) or the thought signature
	// of a part (Gemini). It is sent back unchanged with the part.
	Signature string `json:"signature,omitempty"`
	// Opaque is content the provider gives only in encrypted form: the
	// data of a redacted thinking block (Anthropic), the encrypted content
	// of a reasoning item (OpenAI Responses). It is sent back unchanged.
	Opaque string `json:"opaque,omitempty"`
	// ID is the provider's id of the part, where it has one (the id of an
	// OpenAI reasoning item).
	ID string `json:"id,omitempty"`
	// Provider names the provider whose model produced a part that only
	// it can read back ("anthropic", "gemini", "openai"): a thinking part,
	// or any part with a Signature or Opaque content. A conversation sent
	// to another provider drops such parts (see [ForProvider]).
	Provider string `json:"provider,omitempty"`
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
	// Signature is the provider's opaque signature of the call (Gemini's
	// thought signature of a function call), sent back unchanged with it
	// to the provider named by Provider, and dropped for any other.
	Signature string `json:"signature,omitempty"`
	// Provider names the provider the Signature belongs to.
	Provider string `json:"provider,omitempty"`
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
	// CacheWriteInputTokens are the input tokens the provider wrote to its
	// prompt cache (Anthropic's cache creation), counted in InputTokens
	// too; providers price them above plain input.
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64 `json:"output_tokens,omitempty"`
	// ReasoningTokens are the output tokens the model spent reasoning
	// (thinking), counted in OutputTokens too.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	TotalTokens     int64 `json:"total_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Requests:              u.Requests + v.Requests,
		InputTokens:           u.InputTokens + v.InputTokens,
		CachedInputTokens:     u.CachedInputTokens + v.CachedInputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens + v.CacheWriteInputTokens,
		OutputTokens:          u.OutputTokens + v.OutputTokens,
		ReasoningTokens:       u.ReasoningTokens + v.ReasoningTokens,
		TotalTokens:           u.TotalTokens + v.TotalTokens,
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
	// Thinking is more of the model's shown reasoning.
	Thinking string `json:"thinking,omitempty"`
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

// Sentinels that a *[StatusError] matches with [errors.Is], whatever the
// provider: code that reacts to a kind of failure need not know each
// provider's status codes and error types.
var (
	// ErrRateLimited matches a request refused for its rate (HTTP 429, or
	// the provider's rate-limit error type).
	ErrRateLimited = errors.New("model: rate limited")
	// ErrOverloaded matches a provider too busy to answer (HTTP 503 or
	// 529, Anthropic's overloaded_error, Gemini's UNAVAILABLE).
	ErrOverloaded = errors.New("model: provider overloaded")
	// ErrContextTooLong matches a request whose conversation exceeds the
	// model's context window.
	ErrContextTooLong = errors.New("model: context too long")
	// ErrAuthentication matches a request refused for its credentials
	// (HTTP 401 or 403).
	ErrAuthentication = errors.New("model: authentication failed")
	// ErrInvalidRequest matches a request the provider refused as
	// malformed or unsupported (HTTP 400, 404, 413 or 422), a context too
	// long included.
	ErrInvalidRequest = errors.New("model: invalid request")
)

// StatusError is an HTTP error from a model provider, with what the
// provider said of it.
type StatusError struct {
	// Provider names the provider ("openai", "anthropic", "gemini").
	Provider   string
	StatusCode int
	// Type and Code are the provider's own error type and code, where it
	// sends them (OpenAI's error.type and error.code, Anthropic's
	// error.type, Gemini's error.status).
	Type string
	Code string
	// Message is the provider's message.
	Message string
	// RequestID is the provider's id of the request, for its support.
	RequestID string
	// RetryAfter is how long the provider asked to wait before trying
	// again (Retry-After, retry-after-ms); zero when it did not say.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("model: %s returned HTTP %d", e.Provider, e.StatusCode)
	if e.Type != "" {
		msg += " " + e.Type
	}
	msg += ": " + e.Message
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

// Retryable reports whether the request may succeed if sent again: rate
// limits (429), timeouts (408), conflicts (409) and server errors (5xx).
func (e *StatusError) Retryable() bool {
	return e.StatusCode == 408 || e.StatusCode == 409 || e.StatusCode == 429 || e.StatusCode >= 500
}

// Is reports whether e is of the kind target names: [ErrRateLimited],
// [ErrOverloaded], [ErrContextTooLong], [ErrAuthentication] or
// [ErrInvalidRequest].
func (e *StatusError) Is(target error) bool {
	typ := strings.ToLower(e.Type + " " + e.Code)
	switch target {
	case ErrRateLimited:
		return e.StatusCode == 429 || strings.Contains(typ, "rate_limit") || strings.Contains(typ, "resource_exhausted")
	case ErrOverloaded:
		return e.StatusCode == 503 || e.StatusCode == 529 || strings.Contains(typ, "overloaded") || strings.Contains(typ, "unavailable")
	case ErrContextTooLong:
		return contextTooLong(e)
	case ErrAuthentication:
		return e.StatusCode == 401 || e.StatusCode == 403 || strings.Contains(typ, "authentication") || strings.Contains(typ, "permission")
	case ErrInvalidRequest:
		switch e.StatusCode {
		case 400, 404, 413, 422:
			return true
		}
		return strings.Contains(typ, "invalid_request") || strings.Contains(typ, "invalid_argument")
	}
	return false
}

// contextTooLong recognises the providers' ways of saying a conversation
// does not fit the model's context window.
func contextTooLong(e *StatusError) bool {
	if e.StatusCode != 400 && e.StatusCode != 413 {
		return false
	}
	if e.Code == "context_length_exceeded" || e.Code == "string_above_max_length" {
		return true
	}
	msg := strings.ToLower(e.Message)
	for _, s := range []string{
		"maximum context length",     // OpenAI
		"context_length_exceeded",    // OpenAI-compatible servers
		"prompt is too long",         // Anthropic
		"input is too long",          // Anthropic
		"exceeds the maximum number", // Gemini: "input token count ... exceeds the maximum number of tokens"
		"context window",             // various
		"too many tokens",            // various
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// ForProvider returns msgs as a model of provider ("openai", "anthropic",
// "gemini") can take them back. Parts and signatures that only another
// provider can read are left out: a thinking part of another provider is
// dropped; a part or tool call that another provider signed keeps its
// content without the signature. Everything else is kept as it is, so a
// conversation continued with the provider that produced it loses
// nothing, and one continued with another provider keeps its text, images,
// tool calls and results. msgs is not modified; when nothing needs to go,
// ForProvider returns msgs itself.
func ForProvider(msgs []Message, provider string) []Message {
	foreign := func(p string) bool { return p != "" && p != provider }
	needs := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			needs = needs || foreign(p.Provider)
		}
		for _, c := range m.ToolCalls {
			needs = needs || foreign(c.Provider)
		}
	}
	if !needs {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		m.Parts = slices.Clone(m.Parts)
		m.Parts = slices.DeleteFunc(m.Parts, func(p Part) bool { return p.Type == PartThinking && foreign(p.Provider) })
		for i, p := range m.Parts {
			if foreign(p.Provider) {
				m.Parts[i].Signature, m.Parts[i].Opaque, m.Parts[i].ID, m.Parts[i].Provider = "", "", "", ""
			}
		}
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i, c := range m.ToolCalls {
			if foreign(c.Provider) {
				m.ToolCalls[i].Signature, m.ToolCalls[i].Provider = "", ""
			}
		}
		if m.Role == RoleAssistant && len(m.Parts) == 0 && len(m.ToolCalls) == 0 {
			continue // only another provider's thinking
		}
		out = append(out, m)
	}
	return out
}
