package openai

import (
	"encoding/json"

	"github.com/calf-go/calf/model"
)

// The chat completions wire format. The model encodes requests and decodes
// responses with these types and encoding/json, and leaves the transport,
// retries and the decoding of error responses to model/internal/transport.

type wireRequest struct {
	Model               string              `json:"model"`
	Messages            []wireMessage       `json:"messages"`
	Tools               []wireTool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage     `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool               `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *wireResponseFormat `json:"response_format,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	MaxTokens           int                 `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                 `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string              `json:"reasoning_effort,omitempty"`
	Stream              bool                `json:"stream,omitempty"`
	StreamOptions       *wireStreamOptions  `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is a request message. Content is a string, a []wirePart, or
// nil (absent).
type wireMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// ReasoningContent is the shown reasoning of an assistant message
	// with tool calls, sent back only with Options.SendReasoning.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type wirePart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

// wireToolCall is a tool call of a message, or a piece of one in a stream
// chunk, where Index says which call it continues.
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
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *wireJSONSchema `json:"json_schema,omitempty"`
}

type wireJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// wireCompletion is a chat completion, or a chunk of a streamed one.
type wireCompletion struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
	// Error is the error object some servers send in a chunk of a stream
	// (OpenRouter, when the upstream provider fails mid-stream) or in a
	// body with status 200.
	Error *wireError `json:"error"`
}

// wireError is an error object: {"message", "type", "code"}, the code a
// string or a number.
type wireError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// statusError converts an error object sent with status 200.
func (e *wireError) statusError() *model.StatusError {
	return streamError(e.Type, rawCode(e.Code), e.Message)
}

// rawCode returns an error code sent as a string or a number.
func rawCode(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

type wireChoice struct {
	Index        int          `json:"index"`
	Message      wireResponse `json:"message"`
	Delta        wireResponse `json:"delta"`
	FinishReason string       `json:"finish_reason"`
}

// wireResponse is a completion's message or a chunk's delta.
type wireResponse struct {
	Content   string         `json:"content"`
	Refusal   string         `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls"`
	// FunctionCall is the deprecated single call of a server answering in
	// the shape of the API's "functions" era.
	FunctionCall *wireFunctionCall `json:"function_call"`
	// ReasoningContent is the shown reasoning of DeepSeek, vLLM, llama.cpp
	// and others; Reasoning that of OpenRouter and Ollama; ReasoningDetails
	// OpenRouter's structured form of it. OpenAI's own API sends none.
	ReasoningContent string                `json:"reasoning_content"`
	Reasoning        reasoningText         `json:"reasoning"`
	ReasoningDetails []wireReasoningDetail `json:"reasoning_details"`
}

// thinking returns the shown reasoning of a message or a delta: its
// reasoning_content, else its reasoning, else the text of its
// reasoning_details (which OpenRouter sends besides reasoning, with the
// same text).
func (r *wireResponse) thinking() string {
	if r.ReasoningContent != "" {
		return r.ReasoningContent
	}
	if r.Reasoning != "" {
		return string(r.Reasoning)
	}
	if len(r.ReasoningDetails) == 0 {
		return ""
	}
	var s string
	for _, d := range r.ReasoningDetails {
		switch d.Type {
		case "reasoning.text":
			s += d.Text
		case "reasoning.summary":
			s += d.Summary
		}
	}
	return s
}

// reasoningText is a reasoning field: a string; anything else (null, an
// object of a server with its own idea) reads as no text rather than as
// a malformed response.
type reasoningText string

// UnmarshalJSON keeps a string and ignores other values.
func (r *reasoningText) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*r = reasoningText(s)
	}
	return nil
}

// wireReasoningDetail is an entry of OpenRouter's reasoning_details:
// "reasoning.text" with text, "reasoning.summary" with summary, or
// "reasoning.encrypted" with data (not kept).
type wireReasoningDetail struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Summary string `json:"summary"`
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}
