// Package conversation holds the data of conversations between a user
// and a set of agents: prototypes, instances, topics and messages, kept in
// a [store.Store] as versioned records.
//
// # The model
//
// A [Prototype] is a named template of agents: its role, system prompt,
// model (by the names of model/models), built-in tools, MCP servers,
// permissions, the prototypes it may start as subagents, and its [Kind]:
// an LLM agent, Go code (the docmem agent), or an agent served by another
// process in any language. Prototypes are data, records in the store,
// registered from Go ([Prototypes.Register]) or loaded from a YAML file
// ([LoadFile], [Parse]) that is validated whole, every problem listed
// with its line.
//
// A [Conversation] is one user's exchange, identified by a UUID.
// [Conversations.Create] creates it with an instance of the entry
// prototype ([Options.Entry], by default "conversational-agent") and the
// topic between the user's side ([UserParticipant]) and that instance.
//
// An [Instance] is a prototype at work in one conversation. Its id is
// "{prototype}-{conversation}", such as conversational-agent-0b6f…: a
// conversation holds at most one instance of each prototype, and whoever
// knows the prototype and the conversation can address it. An idle
// instance is its record and no more. [Conversations.Spawn] starts the
// instance of a subagent on behalf of a parent instance, idempotently:
// concurrent and repeated calls, and calls retried after a failed or
// ambiguous write, leave one instance.
//
// A [Topic] is the pair of participants that talk: the parent and the
// instance it started, or the user and the entry instance. Each direction
// of a topic has its channel, calf.conv.{conversation}.{from}.{to}
// ([Channel]); names and ids are bounded so that the longest channel is a
// valid subject or topic on every broker.
//
// A [ConversationMessage] is what every conversation channel carries, as
// JSON: the wire format of docs/channels.md. An error message, by which
// the host refuses a message or reports a failure, starts with "error: "
// ([ConversationMessage.IsError]).
//
// [Conversations.Stop] stops a conversation and its instances; from then
// on [Conversations.Spawn] and [Conversations.Route] (the check before a
// message is sent) refuse with an error matching [ErrStopped]. An instance
// that failed is marked [StatusError] with the reason ([Conversations.Fail])
// and takes no message until [Conversations.Restart].
//
// # Serving
//
// This package holds the data and serves nothing; it links no model
// provider. Package conversation/host serves the instances on an agent
// runtime (LLM prototypes as agents on a model opener of the caller's,
// code prototypes such as conversation/docmem's, external ones in their
// own processes), and package server offers conversations over HTTP.
//
// The conversation channels are among the event log's default patterns
// (package eventlog), each conversation's messages in the log of its id.
//
// docs/conversations.md describes it all, and what is still missing.
package conversation
