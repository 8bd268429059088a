// Package host serves the instances of conversations (package
// conversation) on an agent runtime ([agent.Runtime]), durably and
// without a goroutine per instance or per run.
//
// [New] makes a [Host] of the conversations kept in a store; [Host.Serve]
// subscribes one handler of every conversation channel in one consumer
// group ([ChannelPattern]), keyed by conversation so that a conversation's
// messages are handled in order, in any number of processes.
//
// # Instances
//
// An LLM prototype is served as an agent ([NewAgent]: model, system
// prompt, built-in tools, permissions); a message to one of its instances
// starts a run in the session whose id is the instance's id, one run at a
// time per instance, and the run's output comes back through
// [agent.ReplyTo] to be sent to the sender. An LLM instance whose
// prototype has subagents gets the start_conversation and send tools, and
// the "# Run" blocks of its answers are carried out the same way. The
// instance's session, its user-facing context, keeps the messages it
// answered and its answers; the calls it made and their results stay in
// its runs' records, its tool context ([Host.ToolContext]).
//
// The package links no model provider: the caller opens models
// ([Options.Model], [AgentOptions.Model]), usually with package
// model/models, which links them all:
//
//	h := host.New(rt, convs, &host.Options{
//		Model: func(name string) (model.Model, error) { return models.Open(name, nil) },
//	})
//
// A code prototype is served by a [CodeHandler] (package
// conversation/docmem's for the docmem agent); an external one by
// processes of its own, in any language: the host forwards the messages
// of its instances to the prototype's channel ([ExternalChannel]) as
// [ExternalRequest]s, which those processes consume in the channel's
// consumer group, and they answer on the conversation channel
// (docs/conversations.md tells what to read and write, and
// internal/peers/convagent is such an agent in Node.js). A message that
// cannot be served is answered by an error message
// ([conversation.ConversationMessage.IsError]), never dropped.
// [Host.Stop] stops a conversation, cancels its runs and deletes its
// channels on brokers that can.
//
// # Failed instances
//
// An instance whose run ends in an error, or that the host cannot serve
// (its prototype not registered, its agent not made, no model opener or
// no [CodeHandler] for it), is marked failed with the reason
// ([conversation.Conversations.Fail]); the messages queued for it and
// those sent to it later are refused with that reason until
// [Host.Restart] puts it back to work, its session kept. A message never
// restarts an instance.
//
// # Inside the host
//
// [Options] gives the host what it does not make itself: the options
// every agent of the host starts from (Agent), the opener of the
// prototypes' MCP servers (MCP; this package imports no MCP client), the model opener (Model;
// this package links no model provider), and
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
// and started again). [conversation.Conversations.History] reads the user-facing
// history, [Host.ToolContext] the tool context from the runs' records.
//
// After a restart on an in-memory broker, [Host.Recover] carries each
// instance's current message on once: its run resumed through
// [agent.Agent.Recover], its output emitted again, or the message
// submitted again.
//
// docs/conversations.md describes it all.
package host
