// Package approval reads and answers the durable approval requests of
// agents' tool calls, in the state store.
//
// An agent whose permissions (agent.Permissions) ask before a call, or
// whose pre_tool_use hook asks, does not run the call: its worker records
// an [Approval] request (kind [Kind], id [ID] of the run and the tool call)
// and publishes it on the agent's approval channel ([Channel]), where the
// run's stream shows it (agent.EventApproval). The run then holds nothing
// but its stored state, for as long as no one answers: a minute or a
// week, across restarts of every process.
//
// A person answers from any process that shares the store: [Respond]
// records the [Answer] and publishes it, and a worker of the agent runs
// the call with the approved arguments, or tells the model that it was
// denied. The answer carries the request's [Approval.Digest], so an answer
// given for other arguments than those shown is refused ([ErrMismatch]).
// [Get] and [List] read the requests: List with a run's id finds those of
// the runs it started too (subagents, handoffs, team members), and lists a
// pending request whose run has ended as [Cancelled].
//
// A request may expire at its [Approval.ExpiresAt] (the agent's
// Permissions.ApprovalTimeout): a durable timer started with it calls
// [ExpireRequest], which denies it if no one answered. [Expire] lists
// every request and denies those past their time, for requests recorded
// without a timer; agent workers call it when they start.
//
// # Answering without the workers' broker
//
// A run served on an in-process broker (the embedded default, as calf run,
// calf chat and calf serve use) reaches no other process. Its runtime
// watches the requests its runs wait for in the store, so an answer
// recorded there by another process is enough: [Respond] with a nil
// client records it, and the runtime publishes it within a second or two
// (calf approvals approve does this when given no broker).
//
// # Stored format
//
// The JSON of [Approval] is what the store holds and what the approval
// channel carries; records written by earlier versions are read by this
// one (the agent package's testdata/records).
package approval
