// Package anthropic is the [model.Model] for Anthropic's Messages API
// (POST /v1/messages), spoken over HTTP with wire types of its own. It
// also streams ([model.Streamer]).
//
//	m, err := anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5"}) // key from ANTHROPIC_API_KEY
//	m, err := anthropic.FromEnv("claude-haiku-4-5")                        // ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
//	m, err := anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5", ThinkingBudget: 4096})
//
// # Environment
//
// ANTHROPIC_API_KEY is the API key when [Options.APIKey] is empty; without
// either, New fails with an error that matches [model.ErrNoModel] and
// names ANTHROPIC_API_KEY. ANTHROPIC_BASE_URL is the API's root when
// [Options.BaseURL] is empty (default https://api.anthropic.com).
// Requests carry the headers x-api-key, anthropic-version (2023-06-01)
// and content-type, with [Options.Headers] (an anthropic-beta header, for
// instance).
//
// # Requests
//
//   - System messages become the top-level system prompt, as text blocks.
//   - User messages become user turns of text and image blocks; an image
//     given inline (or as a data URL) is sent in base64 with its media
//     type, one given by http(s) URL as a url source.
//   - Tool messages become tool_result blocks (is_error for
//     [model.Message.IsError]); the results that follow one response go
//     back together in one user turn. A result that is only text is sent
//     as a string, one with images as text and image blocks.
//   - Assistant messages become assistant turns: their thinking first (see
//     below), then their text, then a tool_use block per tool call, whose
//     input is the call's arguments parsed. Arguments that are not a JSON
//     object (malformed ones, which a model of another provider may have
//     sent) go back as {"invalid_arguments": "<their text>"}, since the
//     API takes nothing but an object; no arguments as {}.
//   - Tools are sent with their JSON Schema as input_schema. The tool
//     choice maps onto tool_choice: auto, none, required as "any", a tool's
//     name as {"type": "tool", "name": ...}; ParallelToolCalls false sets
//     disable_parallel_tool_use. Without tools no tool choice is sent.
//   - [model.Request.Output] is sent as output_config.format, a
//     json_schema format with the schema as it is (the API wants
//     "additionalProperties": false on its objects, which schemas inferred
//     from Go types have); the response's text is the JSON.
//   - max_tokens, which the API requires, is the request's MaxTokens, else
//     [Options.MaxTokens], else 8,192 (DefaultMaxTokens).
//   - The temperature is sent when set, except with thinking on.
//
// Messages go through [model.ForProvider] first: thinking and signatures
// of another provider's models are left out.
//
// # Extended thinking
//
// [Options.ThinkingBudget] turns thinking on: thinking: {"type":
// "enabled", "budget_tokens": n}. max_tokens must exceed the budget: a
// bound that does not is raised by the budget, so the answer still has the
// tokens it was given. The API takes no temperature but 1 with thinking,
// so none is sent; nor does it take a forced tool choice ("any" or a
// tool's name).
//
// A response's thinking blocks become [model.PartThinking] parts of the
// assistant message, with Provider "anthropic", in the order the API sent
// them: a thinking block's text and its Signature; a redacted_thinking
// block's data as Opaque. Sent back in the conversation, they go first in
// their assistant turn, unchanged, as the API requires to continue a turn
// with tool results. A thinking part with neither a signature nor opaque
// data cannot be checked by the API and is left out.
//
// # Prompt caching
//
// By default ([CachingOn]) a request marks three cache breakpoints,
// cache_control {"type": "ephemeral"}: the last block of the system
// prompt, the last tool, and the last block of the conversation (not a
// thinking block, which cannot carry one). The API then serves the
// unchanged prefix of the next turn from its cache, which costs a tenth
// of plain input to read, and a quarter more to write; prefixes under the
// model's minimum (1,024 or 2,048 tokens) are not cached, at no cost.
// [CachingOff] sends no breakpoints.
//
// # Responses
//
// Text blocks become text parts, tool_use blocks tool calls (id, name, the
// input as JSON text), and the usage counts one request: InputTokens is
// input_tokens plus the cache's reads and writes, CachedInputTokens the
// reads (cache_read_input_tokens), CacheWriteInputTokens the writes
// (cache_creation_input_tokens). Stop reasons: end_turn and stop_sequence
// are [model.FinishStop], tool_use [model.FinishToolCalls], max_tokens
// and model_context_window_exceeded [model.FinishLength], refusal
// [model.FinishContentFilter], pause_turn and any other
// [model.FinishOther]. The response's Model and ID are the API's.
//
// [Model.GenerateStream] reads the server-sent events (message_start,
// content_block_start, content_block_delta with text, input_json_delta,
// thinking and signature deltas, content_block_stop, message_delta,
// message_stop, ping) and yields text, thinking and tool-call deltas (a
// call's index among the response's calls, its id and name first, then
// its arguments in pieces), then the same response Generate returns.
//
// # Errors, retries and timeouts
//
// Rate limits (429), timeouts (408), conflicts (409), server errors (5xx,
// 529 overloaded among them) and connection errors are retried with
// exponential backoff, honouring retry-after, up to [Options.MaxRetries]
// times. An HTTP error that remains is a *[model.StatusError] with the
// API's error type and request id; it matches [model.ErrRateLimited],
// [model.ErrOverloaded], [model.ErrContextTooLong] ("prompt is too
// long"), [model.ErrAuthentication] or [model.ErrInvalidRequest] with
// errors.Is. An error event in a stream ends it with a *[model.StatusError]
// of the event's type, whose StatusCode is the one the API gives that
// type (overloaded_error 529, api_error 500, rate_limit_error 429, ...);
// a stream is not retried once it has begun. Each attempt is bounded by
// [Options.Timeout]; a call that runs out of time matches
// [model.ErrTimeout].
package anthropic
