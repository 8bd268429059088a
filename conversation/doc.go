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
// process in any language. Prototypes are data: records of kind
// [KindPrototype], registered from Go ([Prototypes.Register]) or loaded
// from a YAML file ([LoadFile], [Parse]) that is validated whole, every
// problem listed with its line.
//
// A [Conversation] (kind [KindConversation]) is one user's exchange,
// identified by a UUID. [Conversations.Create] creates it with an
// instance of the entry prototype ([Options.Entry], by default
// "conversational-agent") and the topic between the user's side
// ([UserParticipant]) and that instance.
//
// An [Instance] (kind [KindInstance]) is a prototype at work in one
// conversation. Its id is "{prototype}-{conversation}" ([InstanceID]),
// such as conversational-agent-0b6f…: a conversation holds at most one
// instance of each prototype, and whoever knows the prototype and the
// conversation can address it. An idle instance is its record and no
// more. [Conversations.Spawn] starts the instance of a subagent on behalf
// of a parent instance, idempotently: concurrent and repeated calls, and
// calls retried after a failed or ambiguous write, leave one instance.
//
// A [Topic] (kind [KindTopic]) is the pair of participants that talk:
// the parent and the instance it started, or the user and the entry
// instance. Each direction of a topic has its channel,
// calf.conv.{conversation}.{from}.{to} ([Channel]); names and ids are
// bounded so that the longest channel is a valid subject or topic on
// every broker.
//
// A [ConversationMessage] is what every conversation channel carries, as
// JSON: the wire format of docs/channels.md.
//
// [Conversations.Stop] stops a conversation and its instances; from then
// on [Conversations.Spawn] and [Conversations.Route] (the check before a
// message is sent) refuse with an error matching [ErrStopped].
//
// [ParseRun] reads the "# Run" blocks of a model's text, the form in
// which a model without tool calling starts agents and sends them
// commands; a block with problems gives a [*RunError] listing each.
//
// # Serving
//
// A [Host] serves the instances on an agent runtime ([agent.Runtime]),
// durably and without a goroutine per instance or per run: one handler of
// every conversation channel in one consumer group (ChannelPattern), keyed
// by conversation so that a conversation's messages are handled in order,
// in any number of processes. An LLM prototype is served as an agent
// (model, system prompt, built-in tools, permissions); a message to one of
// its instances starts a run in the session whose id is the instance's id,
// one run at a time per instance, and the run's output comes back through
// [agent.ReplyTo] to be sent to the sender. An LLM instance whose prototype
// has subagents gets the start_conversation and send tools, and the "# Run"
// blocks of its answers are carried out the same way. The instance's
// session, its user-facing context, keeps the messages it answered and its
// answers; the calls it made and their results stay in its runs' records,
// its tool context ([Host.ToolContext]). A code prototype is
// served by a [CodeHandler] (package conversation/docmem's for the docmem
// agent); an external one by processes of its own, in any language: the
// host forwards the messages of its instances to the prototype's channel
// ([ExternalChannel]) as [ExternalRequest]s, which those processes consume
// in the channel's consumer group, and they answer on the conversation
// channel (docs/conversations.md tells what to read and write, and
// internal/peers/convagent is such an agent in Node.js). A message that
// cannot be served is
// answered by an error message ([ErrorPrefix]), never dropped.
// [Host.Stop] stops a conversation, cancels its runs and deletes its
// channels on brokers that can.
//
// # Failed instances
//
// An instance whose run ends in an error, or that the host cannot serve
// (its prototype not registered, its agent not made, no [CodeHandler]
// for it), is marked [StatusError] with the reason ([Conversations.Fail]);
// the messages queued for it and those sent to it later are refused with
// that reason until [Host.Restart] ([Conversations.Restart]) puts it back
// to work, its session kept. A message never restarts an instance.
//
// The conversation channels are among the event log's default patterns
// (package eventlog), each conversation's messages in the log of its id.
//
// docs/conversations.md describes it all, and what is still missing.
//
// # Inside the host
//
// [HostOptions] gives the host what it does not make itself: the options
// every agent of the host starts from (Agent), the opener of the
// prototypes' MCP servers (MCP; this package imports no MCP client), and
// KeepToolTraffic, which keeps the tool calls in the instances' sessions
// too (by default they keep only the messages and the answers,
// [agent.Options.SessionAnswersOnly]). An LLM prototype is made an agent
// named conv-{prototype} by [NewAgent], which the calf command's --agents
// uses too; its instance's messages wait in an inbox record
// (conversation_inbox) and run one at a time in the session named by the
// instance's id. The host's own channels carry what its handlers hand each
// other: calf.convhost.reply (answers to requests), calf.convhost.output
// (runs' outputs, through [agent.ReplyTo]) and calf.convhost.runblock
// ("# Run" blocks). The start_conversation and send tools are
// request-reply with a correlation id derived from the call and a
// timeout. The host prepares the consumer group of an external
// prototype's channel, so that its messages wait for its first process
// (TestExternalAgentInNode runs internal/peers/convagent on NATS, killed
// and started again). [Conversations.History] reads the user-facing
// history, [Host.ToolContext] the tool context from the runs' records.
//
// After a restart on an in-memory broker, [Host.Recover] carries each
// instance's current message on once: its run resumed through
// [agent.Agent.Recover], its output emitted again, or the message
// submitted again.
package conversation
