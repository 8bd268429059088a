// Package extest gives the examples' tests their model: the real
// model/openai adapter, speaking the chat completions wire format over
// HTTP, whose traffic goes through a cassette file (model/cassette) in the
// example's testdata directory.
//
// By default a test replays its cassette, offline. With CALF_RECORD=1 it
// records the cassette again: against OpenAI's API (or the server at
// OPENAI_BASE_URL) when OPENAI_API_KEY is set, or else against a local
// OpenAI-compatible server (model/modeltest's fake) that answers with the
// test's script. The committed cassettes were recorded against that local
// server: they hold the example's real requests, as the adapter encodes
// them, and scripted answers.
package extest
