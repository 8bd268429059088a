// Package team runs several agents (or teams) together on a task, with
// every step of the collaboration an event on the broker.
//
// A [Team] has members ([Member]: an agent through [AgentMember] or
// [RemoteAgent], a workflow through [WorkflowMember], or another *Team)
// and a process:
//
//   - [NewSequential]: each member's output is the next member's input;
//   - [NewConcurrent]: all members work at once, and an [Aggregator] (a
//     function or an agent) combines their answers, failures included;
//   - [NewHierarchical]: a manager agent delegates to the members, which
//     it calls as tools ([agent.Agent.AddSubagent]), and answers;
//   - [NewSwarm]: an entry agent takes the task and the agents hand it on
//     by their own judgment ([agent.Handoff]);
//   - [NewGroupChat]: a [Moderator] (a function or an agent) picks the next
//     speaker each round, until a keyword, a function or a maximum number
//     of rounds ends the chat.
//
// Every function and method of the package that takes an *agent.Runtime
// returns an error matching [agent.ErrNoRuntime] when given nil. On a
// runtime that serves on demand ([agent.RuntimeOptions.ServeOnDemand],
// such as package local's), Run, RunStream, Submit and Recover serve the
// team there first, and its agent, team and workflow members are served
// by their own runs; on another, serve the team and its members
// ([Team.Serve], [agent.Agent.Serve]) in the processes that carry out its
// runs.
//
// # Execution
//
// [Team.Serve] subscribes the team's coordinator: handlers on
// calf.team.{name}.input, .step and .member_done. The input handler
// records the run's first step in the store; the step handler starts the
// step's member runs as child runs (Parent = the team run, ReplyTo = the
// team's member_done channel); the member_done handler records each reply
// and, when a step is complete, decides and records what follows (the next
// step, a moderator's pick, the aggregation, the output) before emitting
// it. So a team run waits for its members without a goroutine, survives
// the crash of any worker, and can be carried out by many workers: its
// state is a store record (of kind [store.KindTeam], id the run id)
// changed by compare-and-swap. Readers see a run through [RunInfo]
// ([Team.LoadRun], [Kind], [DecodeRunInfo]), a copy of what the record says.
// Member run ids are derived from the team run id, the step and the
// member ("{run}.{step}.{member}"), and event ids from the run and the
// step, so a redelivered message starts no member twice.
//
// A team answers exactly as an agent does: an [agent.OutputEvent] on its
// output channel and on the ReplyTo of its input. That is what lets a team
// be the member of another.
//
// A team's runs have the verbs of an agent's and a workflow's:
// [Team.Submit] starts a run and returns its id, [Team.Wait] waits for its
// end in any process, [Team.Run] does both, [Team.Cancel], [Team.Pause]
// and [Team.Resume] control it, and [Team.DecodeOutput] reads its output
// event. [Team.RunStream] yields the run's events and its members' (model
// deltas, tool calls, outputs), each tagged with the step and the member,
// in each member run's causal order (a step's deltas before its tool calls
// and output). A failed or cancelled run's error is an *agent.RunError of
// Kind "team"; its reason names the member that failed, its kind and its
// run id, and the member's own reason.
//
// The channels and payloads are specified in docs/channels.md; when to
// use a team rather than handoffs, agents as tools or a workflow is
// discussed in docs/multi-agent.md.
package team
