// Package telemetry is the agent engine's OpenTelemetry instruments,
// following the semantic conventions of generative AI: an invoke_agent
// span for a run, as its caller sees it, a chat span for each model call
// and an execute_tool span for each tool call, children of the run's span
// whichever process carries them out (the trace context travels in each
// message's traceparent); token usage and operation durations; runs
// started and ended; the time messages wait on the broker; what model
// calls cost; tool calls still running after their timeout.
//
// It knows nothing of the agent package's types: the engine gives it
// names, ids, usage and statuses. Which spans, attributes and metrics it
// records is documented for users in docs/observability.md.
package telemetry
