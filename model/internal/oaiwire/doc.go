// Package oaiwire holds the wire types of the OpenAI chat completions API:
// the request with its messages, tools, tool choice and response format,
// the completion with its choices and usage, the chunks of a streamed
// completion and the error object. Both ends use them: the client encodes
// requests and decodes completions, the fake server decodes requests and
// encodes completions. The types use encoding/json.
package oaiwire
