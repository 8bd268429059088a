// Package openai holds the [model.Model]s of OpenAI's two APIs: [Model]
// for chat completions, which OpenAI and every compatible server speak
// (OpenRouter, Ollama, vLLM, llama.cpp and others, chosen by
// [Options.BaseURL]), and [ResponsesModel] for the Responses API, the API
// of OpenAI's reasoning models. Both also run on Azure OpenAI
// ([Options.Azure]). [Embedder] computes embeddings. The package speaks
// the APIs' HTTP and JSON itself, with no SDK, over the transport that the
// model adapters share (retries, timeouts, typed errors, server-sent
// events).
//
//	m, err := openai.New(openai.Options{Model: "gpt-4o-mini"}) // key from OPENAI_API_KEY
//	m, err := openai.New(openai.Options{Model: "llama3.2", BaseURL: "http://127.0.0.1:11434/v1"})
//	m, err := openai.FromEnv("gpt-4o-mini") // OPENAI_API_KEY and OPENAI_BASE_URL
//	r, err := openai.NewResponses(openai.Options{Model: "o4-mini", ReasoningSummary: "auto"})
//	m, err := openai.New(openai.Options{Model: "gpt-4o", Azure: &openai.AzureOptions{Deployment: "chat"}})
//
// # Configuration and environment
//
// [Options] configures all three constructors. Without an [Options.APIKey]
// the key is $OPENAI_API_KEY, and without an [Options.BaseURL] the base
// URL is $OPENAI_BASE_URL, else OpenAI's API (https://api.openai.com/v1);
// a base URL alone is enough, for a local server that needs no key. The
// key goes in an "Authorization: Bearer" header; [Options.Headers] adds
// others. With [Options.Azure], requests go to an Azure OpenAI deployment,
// {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...,
// with the key in the api-key header: the endpoint is
// $AZURE_OPENAI_ENDPOINT, the key $AZURE_OPENAI_API_KEY and the
// api-version $OPENAI_API_VERSION unless set (default
// [DefaultAzureAPIVersion], 2024-10-21), the deployment [Options.Model]
// unless named (see [AzureOptions]). [FromEnv] turns to Azure when
// neither OPENAI_API_KEY nor OPENAI_BASE_URL is set and
// AZURE_OPENAI_ENDPOINT is.
//
// # Chat completions
//
// [Model] posts to {base}/chat/completions. Messages, tool definitions
// (their JSON Schema as the function's parameters), the tool choice, the
// output schema (as a json_schema response format), the temperature,
// parallel tool calls and [Options.ReasoningEffort] (reasoning_effort)
// map onto the API's fields. Images given inline are sent as base64 data
// URLs. The API does not take images in tool messages, so the images of a
// tool result follow the tool messages in a user message. The token limit
// is sent as max_completion_tokens to OpenAI's own API and to Azure, whose
// reasoning models reject max_tokens, and as max_tokens to other servers,
// which all understand it. A user message that is only text is sent as a
// plain string, which every compatible server accepts. Thinking parts are
// not sent, OpenAI's API having no field for them, except with
// [Options.SendReasoning] (on by default for DeepSeek's API): then the
// shown reasoning of an assistant message with tool calls goes back as
// its reasoning_content, which DeepSeek's thinking mode requires.
//
// Compatible servers that show the model's reasoning send it beside the
// text: reasoning_content (DeepSeek, vLLM, llama.cpp), reasoning
// (OpenRouter, Ollama) or reasoning_details (OpenRouter). Whichever comes
// becomes a thinking part before the text (Provider "openai"), and
// thinking deltas when streamed.
//
// The first choice becomes the [model.Response]: its text (or refusal),
// its tool calls with their arguments exactly as the model sent them (a
// server answering with the deprecated function_call gives one tool call),
// the finish reason, and the usage, which counts one request, with
// prompt_tokens_details.cached_tokens as CachedInputTokens and
// completion_tokens_details.reasoning_tokens as ReasoningTokens.
// Streaming ([Model.GenerateStream]) asks for the usage with
// stream_options.include_usage, reads the chunks up to the [DONE] marker,
// yields thinking, text and tool-call deltas, and then the same response that
// [Model.Generate] returns.
//
// # The Responses API
//
// [ResponsesModel] posts to {base}/responses. System messages become the
// instructions; the other messages become input items: user and assistant
// messages with input_text, input_image and output_text content, the
// assistant's tool calls as function_call items and tool results as
// function_call_output items, and the thinking parts of an OpenAI model
// as the reasoning items they came from (id, summary and encrypted
// content unchanged). Tools are function tools with strict false (the API
// would otherwise make them strict, which refuses most schemas); the
// output schema is a json_schema text format; the token limit is
// max_output_tokens. A request is not stored at OpenAI (store false)
// unless [Options.Store] asks, and it includes reasoning.encrypted_content,
// so that each turn sends the whole conversation, its reasoning with it,
// and needs nothing kept between turns.
//
// Output items become the response's message: message items its text,
// function_call items its tool calls (the call_id as the id), reasoning
// items thinking parts with Provider "openai", one per part of the summary
// (its text), each with the item's id ([model.Part.ID]) and the first
// with its encrypted content ([model.Part.Opaque]). The status gives the
// finish reason: completed (tool calls, or stop), incomplete
// (max_output_tokens is length, content_filter is content filter). The
// usage maps input_tokens, input_tokens_details.cached_tokens,
// output_tokens and output_tokens_details.reasoning_tokens. Streaming
// reads the typed events: text deltas from response.output_text.delta,
// thinking deltas from response.reasoning_summary_text.delta, tool-call
// deltas from response.output_item.added and
// response.function_call_arguments.delta, and the response from
// response.completed or response.incomplete.
//
// # Errors, retries and timeouts
//
// Rate limits (429), timeouts (408), conflicts (409), server errors (5xx)
// and connection errors are retried with exponential backoff and jitter,
// honouring Retry-After, up to [Options.MaxRetries] times. An HTTP error
// that remains is a *[model.StatusError] with OpenAI's error type and
// code, which matches [model.ErrRateLimited], [model.ErrContextTooLong],
// [model.ErrAuthentication] and the other sentinels with errors.Is. A 404
// or 405 from a base URL whose path does not end in /v1 asks whether /v1
// is missing. An error that comes inside a stream (the Responses API's
// error event and response.failed, or an error chunk of a chat
// completion stream) or a failed response is a *[model.StatusError] too,
// with the HTTP status its code stands for (429 for a rate limit, 400 for
// a refused request, else 500). A stream that ends before its response is
// complete is an error matching [io.ErrUnexpectedEOF], never a shorter
// answer. Each attempt is bounded by [Options.Timeout]; a call that runs
// out of time, by that timeout or ctx's deadline, returns an error that
// matches [model.ErrTimeout]. A cancelled ctx stops the call at once with
// ctx's error.
package openai
