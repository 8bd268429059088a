// Package agent turns a model, instructions and typed tools into an agent
// that runs as event handlers on a Calf broker.
//
// An [Agent] is configuration. [Agent.Serve] subscribes its handlers on a
// [Runtime] (a broker client plus a state store); [Agent.Run] and
// [Agent.RunStream] start a run by emitting its input event and wait for
// its output. Because the handlers keep everything in the store, the
// process that starts a run need not be the one that carries it out, and a
// run survives the crash of the process that was carrying it out.
//
// # The handlers
//
// For an agent named "calc" the handlers subscribe to:
//
//   - calf.agent.calc.input: create the run's state from the input and the
//     session's history, then ask for step 1;
//   - calf.agent.calc.inference: call the model once per step, record the
//     response, then emit one tool call per requested tool, a repair step
//     for invalid structured output, or the output;
//   - calf.agent.calc.tool_call.{tool}: execute the tool with a
//     [RunContext] and emit its result (an error goes back to the model);
//   - calf.agent.calc.tool_result: record the result; the last result of a
//     step advances the run and emits exactly one inference.
//
// The payloads and the rules each handler follows are specified in
// docs/channels.md, so an agent or a tool in another language can take part.
//
// # Idempotency
//
// Every handler may see the same message twice. Each saves its decision
// with a compare-and-swap before emitting what follows, and derives event
// ids from the run, the step and the tool call, so that a redelivered
// message re-emits the same events instead of repeating work: a recorded
// model response is not requested again and a recorded tool result is not
// executed again.
//
// # Dependencies
//
// Deps reach tools and dynamic instructions through [RunContext]. Values
// that can be serialized travel with the run ([RunOptions.Deps]);
// process-local values (a database handle, a client with credentials) are
// given by each worker at registration ([ServeOptions.LocalDeps]).
//
// # Structured output
//
// When Out is not a string, the model is asked for JSON following Out's
// schema (see [tool.SchemaFor]); the answer is validated and decoded, and an
// invalid answer is sent back with the validation error, at most
// [Options.MaxRepairs] times.
package agent
