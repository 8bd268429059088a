// Package openai is the [model.Model] for the OpenAI chat completions API
// and every server compatible with it: OpenRouter, Ollama, vLLM,
// llama.cpp and others, chosen by [Options.BaseURL].
//
//	m, err := openai.New(openai.Options{Model: "gpt-4o-mini"}) // key from OPENAI_API_KEY
//	m, err := openai.New(openai.Options{Model: "llama3.2", BaseURL: "http://127.0.0.1:11434/v1"})
//	m, err := openai.FromEnv("gpt-4o-mini") // OPENAI_API_KEY and OPENAI_BASE_URL
//
// # Requests
//
// Messages, tool definitions (their JSON Schema as the function's
// parameters), the tool choice, the output schema (as a json_schema
// response format), the temperature and parallel tool calls map onto the
// API's fields. Images given inline are sent as base64 data URLs. The API
// does not take images in tool messages, so the images of a tool result
// follow the tool messages in a user message. The token limit is sent as
// max_completion_tokens to OpenAI's own API, whose reasoning models reject
// max_tokens, and as max_tokens to other servers, which all understand it.
// A user message that is only text is sent as a plain string, which every
// compatible server accepts.
//
// # Responses
//
// The first choice becomes the [model.Response]: its text (or refusal),
// its tool calls with their arguments exactly as the model sent them, the
// finish reason, and the usage, which counts one request. Streaming
// ([Model.GenerateStream]) yields text and tool-call deltas and then the
// same response that [Model.Generate] returns.
//
// # Errors, retries and timeouts
//
// Rate limits (429), timeouts (408), conflicts (409), server errors (5xx)
// and connection errors are retried with exponential backoff, up to
// [Options.MaxRetries] times. An HTTP error that remains is a
// *[model.StatusError]. Each attempt is bounded by [Options.Timeout]; a
// call that runs out of time, by that timeout or ctx's deadline, returns
// an error that matches [model.ErrTimeout]. A cancelled ctx stops the call
// at once with ctx's error.
package openai
