// Package workflow runs typed graphs of steps over a state, as events.
//
// A [Workflow] is a graph of nodes over a state of type S. A node is a
// function of the state ([Func]), an agent run ([AgentNode], or
// [TypedAgentNode] for an agent whose input message is the JSON of a
// typed value) or a run of another workflow ([SubWorkflow]). Edges say
// what runs next; a route ([Builder.Route]) chooses the next node from the
// state, which also makes loops, bounded by MaxVisits; a parallel step
// ([Builder.Parallel]) runs several branches on copies of the state and
// merges them before a join node; an edge to [End] completes the run.
// [Builder.Build] checks the graph and reports every problem at once.
//
//	wf, err := workflow.New[Draft]("review", nil).
//		Node("write", workflow.AgentNode(writer, writePrompt, setDraft)).
//		Node("review", workflow.AgentNode(reviewer, reviewPrompt, setReview)).
//		Edge(workflow.Start, "write").
//		Edge("write", "review").
//		Route("review", approvedOrAgain, "write", workflow.End).
//		Build()
//
// Every method that takes an *agent.Runtime returns an error matching
// [agent.ErrNoRuntime] when given nil. On a runtime that serves on demand
// ([agent.RuntimeOptions.ServeOnDemand], such as package local's), Run,
// RunStream, Submit, Recover, Answer and Fork serve the workflow there
// first, and its agent and sub-workflow nodes serve theirs; on another,
// serve the workflow and the agents of its agent nodes ([Workflow.Serve],
// [agent.Agent.Serve]) in the processes that carry out its runs.
//
// # Execution as events
//
// Nothing runs in a hidden loop. Every step is an event on the workflow's
// channels (calf.workflow.{name}.input, .step, .reply, .resume,
// .node_done, .output; docs/channels.md describes them), handled by
// whichever worker serves the workflow ([Workflow.Serve]). A step's
// handler loads the run's state from the store, runs the node, records the
// new state as a checkpoint with a compare-and-swap, and only then emits
// the next step. Event ids derive from the run id, the step number and the
// node, so a redelivered step whose node has completed is recognised and
// skipped; a node runs again only if its worker stopped before recording
// its result. An agent node submits its agent's run as a child run whose
// output comes back as an event on the reply channel: no goroutine waits
// for it, and neither does one wait for an interrupted run. A workflow run
// can itself be a child: given RunOptions.ReplyTo, it reports its end as
// an agent.OutputEvent, the way an agent run does.
//
// # Checkpoints, interrupts, recovery
//
// The state after every step is kept as a checkpoint ([Workflow.Checkpoints]);
// [Workflow.Fork] starts an independent run from any checkpoint, with the
// same or a changed state. A node that needs outside input returns
// [Interrupt]: the run is suspended at no cost but its stored state until
// [Workflow.Answer] sends the input, and the node then runs again on any
// worker and reads it with [ResumeInput]. The answer is a signal of the
// run, calf.interrupt.{n} for its n-th interrupt (see [WaitSignal]): a
// process that shares only the store with the one serving the run (an
// in-process broker over one SQLite file) can answer it. Names that begin
// with "calf." are Calf's own: a caller cannot send that signal by name. After a crash that lost events
// (an in-memory broker), [Workflow.Recover] re-emits the pending step of
// every unfinished run from its stored state.
//
// # Runs
//
// A workflow's runs have the verbs of an agent's and a team's:
// [Workflow.Submit] starts a run without waiting, [Workflow.Wait] waits for
// its end (or its next interrupt), [Workflow.Run] does both,
// [Workflow.RunStream] yields the run's events, [Workflow.Cancel] ends it,
// [Workflow.Pause] and [Workflow.Resume] stop it between two steps and
// let it go on, and [Workflow.DecodeOutput] reads an output event. A run
// that fails or is cancelled gives an *agent.RunError of Kind "workflow",
// matching agent.ErrRunFailed or agent.ErrRunCancelled (and [ErrLimit] for
// a run a bound stopped).
//
// A pause is a caller's: asked while a node runs, it takes effect at the
// next step boundary (the node finishes and its checkpoint is written;
// the next node does not start), and the run then waits with nothing but
// its stored record, in no process, until Resume from any process.
// The runtime's controls by name ([agent.Runtime.Pause],
// [agent.Runtime.Resume], [agent.Runtime.Cancel] with a RunRef of kind
// "workflow", see [Kind]) do the same by the workflow's name, without its
// definition; a cancel by name asks a worker that serves the workflow to
// cancel the run. An interrupt is a node's own: the node asks for input,
// and [Workflow.Answer] (not Resume) gives it.
//
// # Reading runs
//
// [Workflow.LoadRun] returns a run's [RunInfo], a read-only copy of what
// its stored record says (status, position, checkpoint, interrupt, pause,
// usage, the state as JSON); [DecodeRunInfo] makes it from a record alone.
// The record itself is not part of the API; its stored JSON stays readable
// by later versions.
package workflow
