package anthropic

import "encoding/json"

// The JSON of the Messages API, as far as this adapter uses it. Requests
// are encoded from block types of their own, one per kind of content
// block, so that each sends exactly the fields the API wants of it (a
// thinking block its thinking text even when empty); responses and
// stream events are decoded into wireBlock, which has the fields of every
// kind.

// wireRequest is the body of POST /v1/messages.
type wireRequest struct {
	Model        string            `json:"model"`
	MaxTokens    int               `json:"max_tokens"`
	System       []*textBlock      `json:"system,omitempty"`
	Messages     []wireMessage     `json:"messages"`
	Tools        []wireTool        `json:"tools,omitempty"`
	ToolChoice   *wireToolChoice   `json:"tool_choice,omitempty"`
	Thinking     *wireThinking     `json:"thinking,omitempty"`
	Temperature  *float64          `json:"temperature,omitempty"`
	OutputConfig *wireOutputConfig `json:"output_config,omitempty"`
	Stream       bool              `json:"stream,omitempty"`
}

// wireMessage is one user or assistant turn.
type wireMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block of a request. cache marks it as a prompt-cache
// breakpoint; it reports false for a block that cannot be one (thinking).
type block interface {
	cache(*cacheControl) bool
}

// cacheControl marks a prompt-cache breakpoint.
type cacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

type textBlock struct {
	Type         string        `json:"type"` // "text"
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageBlock struct {
	Type         string        `json:"type"` // "image"
	Source       imageSource   `json:"source"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

// imageSource is an image given inline (Type "base64") or by URL (Type
// "url").
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type toolUseBlock struct {
	Type         string          `json:"type"` // "tool_use"
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type toolResultBlock struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	// Content is a string, or a list of text and image blocks.
	Content      any           `json:"content,omitempty"`
	IsError      bool          `json:"is_error,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type thinkingBlock struct {
	Type      string `json:"type"` // "thinking"
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type redactedThinkingBlock struct {
	Type string `json:"type"` // "redacted_thinking"
	Data string `json:"data"`
}

func (b *textBlock) cache(c *cacheControl) bool       { b.CacheControl = c; return true }
func (b *imageBlock) cache(c *cacheControl) bool      { b.CacheControl = c; return true }
func (b *toolUseBlock) cache(c *cacheControl) bool    { b.CacheControl = c; return true }
func (b *toolResultBlock) cache(c *cacheControl) bool { b.CacheControl = c; return true }

// The API refuses cache_control on thinking blocks.
func (*thinkingBlock) cache(*cacheControl) bool         { return false }
func (*redactedThinkingBlock) cache(*cacheControl) bool { return false }

// wireTool is a tool definition.
type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// wireToolChoice is "auto", "any", "none", or "tool" with the tool's
// name.
type wireToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// wireThinking turns extended thinking on.
type wireThinking struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

// wireOutputConfig asks for a response in a JSON Schema.
type wireOutputConfig struct {
	Format wireFormat `json:"format"`
}

type wireFormat struct {
	Type   string          `json:"type"` // "json_schema"
	Schema json.RawMessage `json:"schema"`
}

// wireResponse is a message the API returns, whole or, in a stream, as
// message_start begins it.
type wireResponse struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Role       string      `json:"role"`
	Model      string      `json:"model"`
	Content    []wireBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      wireUsage   `json:"usage"`
}

// wireBlock is a content block of a response, of any kind.
type wireBlock struct {
	Type string `json:"type"`
	// Text of a text block.
	Text string `json:"text"`
	// ID, Name and Input of a tool_use block.
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// Thinking and Signature of a thinking block.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	// Data of a redacted_thinking block.
	Data string `json:"data"`
}

// wireUsage counts a message's tokens. InputTokens leaves out those read
// from or written to the prompt cache.
type wireUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// wireUsageDelta is the usage of a message_delta event: the counts so far
// of those it has.
type wireUsageDelta struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
}

// wireEvent is the data of a streamed event, of any type.
type wireEvent struct {
	Type string `json:"type"`
	// Message of message_start.
	Message *wireResponse `json:"message"`
	// Index of content_block_start, content_block_delta and
	// content_block_stop.
	Index int `json:"index"`
	// ContentBlock of content_block_start.
	ContentBlock *wireBlock `json:"content_block"`
	// Delta of content_block_delta and message_delta.
	Delta *wireDelta `json:"delta"`
	// Usage of message_delta.
	Usage *wireUsageDelta `json:"usage"`
}

// wireDelta is a content_block_delta's or a message_delta's delta.
type wireDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	StopReason  string `json:"stop_reason"`
}
