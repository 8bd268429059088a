// Package model is Calf's provider-neutral contract for language models:
// a [Request] of messages, tool definitions and an optional output schema;
// a [Response] with the assistant's message, the finish reason and token
// usage; and streaming as a sequence of [Chunk] values.
//
// Adapters live in subpackages: model/openai speaks the OpenAI chat
// completions API and so every OpenAI-compatible server (OpenRouter, Ollama,
// vLLM, llama.cpp). model/modeltest has scripted models for tests and an
// in-process fake OpenAI-compatible server.
package model
