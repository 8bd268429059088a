package openai

import "encoding/json"

// The Responses API's wire format (POST /v1/responses), as far as the
// [ResponsesModel] speaks it.

type respRequest struct {
	Model             string          `json:"model"`
	Instructions      string          `json:"instructions,omitempty"`
	Input             []any           `json:"input"`
	Tools             []respTool      `json:"tools,omitempty"`
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Text              *respText       `json:"text,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	MaxOutputTokens   int             `json:"max_output_tokens,omitempty"`
	Reasoning         *respReasoning  `json:"reasoning,omitempty"`
	Store             bool            `json:"store"`
	Include           []string        `json:"include,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
}

// Input items. A message is {role, content: [...]}; the others carry their
// type.

type respMessage struct {
	Role    string        `json:"role"`
	Content []respContent `json:"content"`
}

// respContent is a content part of an input message: input_text,
// output_text (an assistant's earlier text) or input_image.
type respContent struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

type respFunctionCall struct {
	Type      string `json:"type"` // function_call
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type respFunctionCallOutput struct {
	Type   string `json:"type"` // function_call_output
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

type respReasoningItem struct {
	Type             string        `json:"type"` // reasoning
	ID               string        `json:"id"`
	Summary          []respSummary `json:"summary"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
}

type respSummary struct {
	Type string `json:"type"` // summary_text
	Text string `json:"text"`
}

type respTool struct {
	Type        string          `json:"type"` // function
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respText struct {
	Format respFormat `json:"format"`
}

type respFormat struct {
	Type   string          `json:"type"` // json_schema
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type respReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// respResponse is a response object: the body of a response, and the
// "response" of the stream's response.* events.
type respResponse struct {
	ID                string           `json:"id"`
	Model             string           `json:"model"`
	Status            string           `json:"status"`
	Output            []respOutputItem `json:"output"`
	Usage             *respUsage       `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *wireError `json:"error"`
}

// respOutputItem is an output item of any type: message, function_call,
// reasoning, or one the model does not use.
type respOutputItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Content []struct {
		Type    string `json:"type"` // output_text, refusal, reasoning_text
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	CallID           string        `json:"call_id"`
	Name             string        `json:"name"`
	Arguments        string        `json:"arguments"`
	Summary          []respSummary `json:"summary"`
	EncryptedContent string        `json:"encrypted_content"`
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// respEvent is an event of a streamed response, of any type.
type respEvent struct {
	Type        string          `json:"type"`
	Response    *respResponse   `json:"response"`
	OutputIndex int             `json:"output_index"`
	Item        *respOutputItem `json:"item"`
	Delta       string          `json:"delta"`
	// Code, Message and Error belong to the "error" event, which carries
	// its code and message at the top level, or in an error object.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   *wireError      `json:"error"`
}
