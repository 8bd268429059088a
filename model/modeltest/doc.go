// Package modeltest has language models for tests: scripted models for
// unit tests of agents, and a fake OpenAI-compatible HTTP server for tests
// of code that speaks HTTP to a model.
//
// # Scripted models
//
// A [TestModel] answers each call with the next step of its script and
// records the requests it was given:
//
//	m := modeltest.NewTestModel(
//		modeltest.ToolCalls(modeltest.Call("call_1", "weather", `{"city":"Paris"}`)),
//		modeltest.Text("It is sunny in Paris."),
//	)
//
// The helpers [Text], [ToolCalls] and [JSON] build responses with a small,
// fixed token usage, so that usage accounting can be tested. A
// [FunctionModel] computes each response with a function instead.
//
// # Fake server
//
// A [Server] is an in-process HTTP server that speaks the OpenAI chat
// completions API, plain and streamed, and hands each request, decoded into
// a [model.Request], to a handler. Point any OpenAI-compatible client at
// [Server.URL]. [Server.FailNext] injects HTTP errors, and a handler that
// blocks until its context is done simulates a model that never answers.
// The server adds no latency, so benchmarks use it as their model.
package modeltest
