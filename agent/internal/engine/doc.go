// Package engine holds the mechanisms of package agent's handlers and
// streams that need nothing of an agent's configuration or of agent's
// exported types.
//
// # Calls
//
// Making a costly call once in a process ([Flights]) and across processes
// ([Claims]); running tool calls on kept goroutines ([Executor], whose
// [Executor.Call] bounds a call by its timeout, turns a panic into an error
// and hands back what a call returns after its timeout, to drop); calling a
// model with or without streamed deltas ([CallModel]); calling a hook, a
// guardrail or a compactor within a timeout ([CallWithin]); retrying
// through an outage of a service ([UntilAvailable], [RetryOutage]).
//
// # The run's record and its protocol
//
// The conversation part of a run's stored record ([Transcript]): its
// messages, the session history it starts from ([HistoryRef]), the messages
// archived in chunks and read back, the compacted view the model sees
// ([Transcript.View], [SameCompaction], [CheckCompacted]) and the estimate
// of its context ([ContextTokens], [InputSize]); and the part that links
// the run to others ([Lineage]: where its output goes, its parent, its
// correlation id, its handoff chain). The record, package agent's, embeds
// both where their fields were, so that its JSON, a stored format, is
// unchanged; agent converts its exported ReplyTo and Hop to and from the
// engine's [ReplyTo] and [Hop], whose fields are the same. Also the run's
// phases ([Phase]), the ids of a response's tool calls ([UniqueCallIDs]),
// the message a tool's result makes ([ToolMessage]), what a session keeps
// of a run that keeps only answers ([OnlyAnswers]), an output as hooks see
// it ([OutputText]), and the records of a custom step's calls
// ([RecordCall], [RecordedCall]).
//
// # Ids, links between runs, approvals
//
// The deterministic ids of a run's events ([InferenceID] and the others),
// of the run a handoff continues in ([HandoffRunID]) and of a subagent's
// run ([SubagentRunID]), with the reference a subagent's output carries
// back ([SubagentRef]); what a handoff that keeps only text passes on
// ([TextOnly]); following a handoff chain's events ([FollowChain]);
// ending a cancelled run's approval requests ([EndApprovals]).
//
// # Streams
//
// For a run's stream it restores causal order over any event type
// ([StreamOrder], [ChainOrder]; package agent says what each of its events
// waits for), and turns a structured output's text, as it streams, into
// partial outputs ([Partials], on [CompleteJSON]).
//
// # What is still in package agent
//
// The handlers, their inference stages, the handoff chain's reading and the
// rest of the run's record (package agent's state.go) are in package agent:
// the record's other fields hold values of agent's exported types
// (RunStatus, ToolCallRecord, HandoffRequest, HookRecord, GuardrailTrip,
// Permissions, Budget, Spent, PauseState), which the engine cannot import,
// and the handlers call the agent's configuration (model, tools, hooks,
// guardrails, memory, compaction, a custom step) with them. Moving them
// follows [Transcript] and [Lineage]: the engine owns the record with field
// types of its own whose JSON is the same (a struct of plain fields, such
// as Budget, Spent, Hop or ReplyTo, converts to agent's type for free; one
// whose fields have agent's named types, such as HookRecord or
// ToolCallRecord, is copied where a user sees it), and reaches the agent's
// configuration through a struct of funcs that package agent fills. The run
// controls (pause, resume, cancel) write the record too, and change with
// it.
package engine
