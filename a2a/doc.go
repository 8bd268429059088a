// Package a2a speaks the Agent2Agent protocol (A2A 1.0) with the official
// Go SDK (github.com/a2aproject/a2a-go/v2): a [Server] offers a Calf
// agent, team or workflow to A2A clients, each task a durable Calf run.
//
// A message's id (messageId, which A2A has the sender create, unique to
// each message) is its idempotency key: the same message sent again,
// within the runtime's [agent.RuntimeOptions.IdempotencyWindow] and
// across restarts on the same store, gets the task (and the run) the
// first one started and its answer; another message under a messageId in
// use is refused with invalid params (JSON-RPC error -32602). A message
// that continues a task (its taskId set) is not keyed.
package a2a
