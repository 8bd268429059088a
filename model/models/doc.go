// Package models opens models by name, for programs that take the model
// from configuration: the calf command's --model, calf serve, the
// examples, a user's own worker.
//
//	spec                          model
//	openai:NAME                   OpenAI's Chat Completions API (model/openai);
//	                              OPENAI_API_KEY, OPENAI_BASE_URL for any
//	                              compatible server (a key is then optional)
//	NAME                          the same: a bare name is an OpenAI model
//	openai-responses:NAME         OpenAI's Responses API (model/openai);
//	                              the same environment
//	anthropic:NAME                Anthropic's Messages API (model/anthropic);
//	                              ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
//	gemini:NAME                   Google's Gemini (model/gemini);
//	                              GEMINI_API_KEY or GOOGLE_API_KEY,
//	                              GEMINI_BASE_URL
//	ollama:NAME                   a local Ollama server through its
//	                              OpenAI-compatible API; OLLAMA_HOST
//	                              (default http://127.0.0.1:11434)
//	http(s)://HOST[:PORT]/v1#NAME any OpenAI-compatible server at that URL
//	                              (vLLM, llama.cpp, LM Studio, OpenRouter)
//
// Each provider reads its own environment; a missing key is an error
// matching model.ErrNoModel that names the variable to set.
//
// # Why a package of its own
//
// The model adapters must not import each other: this package is where
// they are wired together, once. Importing it links every adapter; a
// program that uses one provider imports its adapter directly.
package models
