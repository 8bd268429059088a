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
// A runtime is always given: a nil one is an error matching
// [ErrNoRuntime]. Package local has the runtime of a program that runs
// its agents in its own process (local.Runtime: an in-process broker and
// an in-memory store), which serves them on demand
// ([RuntimeOptions.ServeOnDemand]): Run, RunStream, Submit and Recover
// serve the agent there first, unless Serve did. This package does not
// import it, nor any broker or store: what a runtime is made of is the
// program's choice.
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
//     [RunContext], record its result and emit it (an error goes back to
//     the model);
//   - calf.agent.calc.tool_result: take the result into the run; the last
//     result of a step advances the run and emits exactly one inference.
//
// On the in-process broker, where every handler of a run is in the process
// that created it, the tool's handler records the result in the run's own
// record, advancing it when it is the step's last result, and the
// tool-result handler finds it there: one write instead of two.
//
// The payloads and the rules each handler follows are specified in
// docs/channels.md, so an agent or a tool in another language can take part.
// [InputChannel], [OutputChannel], [StreamChannel] and [AllChannels] name
// the channels a program outside this package's runtime talks to an agent
// on; the others are the engine's.
//
// # Packages beside this one
//
// Package agent/compaction holds the strategies that keep a run's context
// under a budget of tokens and their configuration ([Options.Compaction]);
// this package decides when to compact, stores the compacted view with the
// run and its session, and reports it ([ContextCompactedEvent]). Package
// agent/commandhook makes a [Hook] that runs an external program.
//
// # Streams
//
// [Agent.RunStream] yields a run's events in causal order on every
// broker: each step's inference, then its deltas, then its tool calls and
// their results, and last the output, which carries (with [Output]) the
// agent that answered and the handoff chain that led to it. A tool call
// travels under its own key so that the calls of a step run in parallel;
// it counts the deltas of its step ([ToolCallEvent.Deltas]) so that an
// observer can hold it until they have been shown. docs/channels.md
// ("Order of a stream") gives the rules for observers in other languages.
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
// A call not yet recorded is made once too, whatever the redeliveries:
//
//   - In a process, one delivery of a tool call (by run and tool-call id)
//     or of a step's model call acts at a time; another waits for it. What
//     the call obtained is kept until it is recorded, never evicted, and a
//     delivery that finds it records it instead of calling again. The
//     handlers record a result or a response through an outage of the
//     store in place, for the outage budget. Memory is bounded by refusing
//     new calls (an outage error, retried without using up an attempt)
//     while 10,000 results, or responses, of an agent wait to be recorded.
//   - Across processes (a broker that is not local), a call is claimed
//     before it is made (a call_claim record naming the process, renewed
//     every second while the call is made and recorded). A delivery in
//     another process that finds the claim waits for the outcome, and
//     takes the call over only once it has seen the claim go unrenewed for
//     3 s while it could read the store: the holder died, or lost the
//     store for longer than that. Only then is a call made a second time;
//     a holder that stops releases its claims, which are taken at once.
//
// The claims cost a store write per call on a broker that is not local
// (three for a W1 run); a run's claims are swept with its other records.
//
// A caller's request sent again (after a timeout, a lost answer, a
// restart) is made once by its idempotency key, kept in the store for
// [RuntimeOptions.IdempotencyWindow]: [RunOptions.IdempotencyKey] gets
// the run the first request started, [SignalOptions.IdempotencyKey]
// ([Runtime.SignalWith]) delivers a signal once, and [Runtime.RunForKey]
// serves an entry point of a program's own. Another request under a key
// in use is an error matching [ErrIdempotencyConflict].
//
// # Workers
//
// A [Worker] hosts the handlers of any number of agents in a process that
// shares its broker and store with others: serve the agents on
// [Worker.Runtime], then [Worker.Run] until the process is told to stop.
// It records dead letters in the store (package deadletter) and drains on
// shutdown: the handlers in progress finish, and the messages not handled
// go back to the broker for the other workers. The calf command's
// "calf worker" is such a process; docs/deploy.md describes deployments.
//
// [Options.Flow] ([FlowControl]) holds an agent's runs to limits per key
// across all its workers (concurrency, rate, debounce, priority, a bound
// across keys): a run over a limit waits as a record in the store, and
// the input handler of whichever worker has room starts it; teams and
// workflows take the same FlowControl ([Runtime.FlowGate]).
//
// # Recovery
//
// On a durable broker a dead worker's messages are delivered again to the
// others. The in-memory broker loses them with its process: after a
// restart on the same store, [Agent.Recover] re-emits the event that
// continues each unfinished run, with the ids the handlers use, so that it
// is harmless where nothing was lost.
//
// A message that a handler fails to handle after its last attempt (the
// store down for longer than the retries last) is parked on the
// dead-letter channel, and the run waits: [Agent.Run] and
// [Agent.RunStream] return an error matching [ErrRunParked] at once, and
// replaying the dead letter continues the run.
//
// # Children, handoffs and subagents
//
// [Agent.Submit] and [Runtime.Submit] start a run without waiting;
// [Agent.Wait] waits for its end, in any process. Its
// output also goes to the [ReplyTo] channel its input names, where a
// parent's handler (of an agent, a team or a workflow) receives it. [Agent.Run]
// uses the same mechanism with the caller's [calf.Client.Inbox], so a
// caller receives only its own outputs. A tool made by [Handoff] (or any
// tool calling [HandoffTo]) ends the run and hands the conversation to
// another agent as a linked run; the caller's Run answers with the chain's
// last output, and [HandoffOptions.MaxHandoffs] bounds cycles. [AsTool]
// and [Agent.AddSubagent] give an agent to another as a tool: each call
// starts a child run with its own turns and deadline, and its output
// comes back as the call's result; [AsTaskAmong] puts several agents
// behind one tool whose call names the one to run. docs/multi-agent.md compares them with
// teams and workflows.
//
// # Types and options
//
// Type parameters appear only at the typed edges: a tool's arguments and
// result ([tool.New]), an agent's output type ([Agent] is Agent[Out]), a
// custom agent's state ([NewCustom]) and the type of a run's dependencies
// ([Deps]). [Options], [RunOptions] and
// [ServeOptions] are plain structs where nil means the defaults, so an
// agent that answers in text and needs no dependencies is written without
// a type argument:
//
//	a, err := agent.New("geographer", m, &agent.Options{Instructions: "Answer briefly."})
//	out, err := a.Run(ctx, local.Runtime(), "What is the capital of France?", nil)
//
// and one with a structured output names its type once:
//
//	r, err := agent.NewTyped[Report]("reporter", m, nil)
//	out, err := r.Run(ctx, local.Runtime(), "Report on ...", nil) // out.Output is a Report
//
// # Dependencies
//
// Dependencies reach tools and dynamic instructions through the run's
// [RunContext], read with a [Deps] handle: a zero-size value of type
// Deps[D] that names D once for the code that gives a run its
// dependencies ([Deps.Value]) and the code that reads them ([Deps.Of]),
// so that giving a value of another type is a compile-time error:
//
//	var shop agent.Deps[Shop]
//	opts := &agent.RunOptions{Deps: shop.Value(Shop{Currency: "EUR"})}
//	// in a tool, from the context it is called with (or the RunContext
//	// of Options.InstructionsFunc):
//	s, err := shop.Of(ctx)
//
// A tool's error goes back to the model; an error of InstructionsFunc, which
// returns (string, error), fails the run, its message in the run's error.
//
// The dependencies are not part of the agent's type: a run carries them,
// and an agent (or a handoff chain of agents, or a team) needs no type
// parameter for them. Values that can be serialized travel with the run,
// as JSON in its input event and its record ([RunOptions.Deps]), and are
// decoded into D when a tool reads them; process-local values (a database
// handle, a client with credentials) are given by each worker at
// registration ([ServeOptions.LocalDeps]) and read as they are. A run
// whose RunOptions leave Deps unset carries none, so an agent whose
// dependencies hold funcs or channels runs with nil options on LocalDeps.
// A handle of another type than the one the dependencies were given with
// reads an error, not a zero value.
//
// # Run options
//
// A nil *RunOptions means a new run outside any session;
// &RunOptions{SessionID: id} continues a session.
//
// # Sessions
//
// A session is a conversation that outlives its runs: each run that names
// it starts from its messages, and one that completes adds its own.
// Package agent/session reads and changes sessions over the runtime's
// store ([Runtime.Store]): list, load, append messages without a run,
// title, fork, delete, export and import. [Runtime.SetSessionBudget] sets
// a session's budget, and tells its runs in progress.
//
// # Reading runs
//
// A run is read through its view, [RunInfo]: id, agent, session, status
// (with a pause in effect), step, messages and tool calls, output or
// error, usage and cost, handoff chain and timestamps. [Agent.LoadRun]
// and [Runtime.LoadAgentRun] make it whole; [Runtime.LoadRun] reads a run
// of any kind by its [RunRef], as a [RunView] (see [RunKind]); [DecodeRunInfo] from a stored record alone, for
// listings (package runner's Runs, the calf command's "calf runs", the
// server's inspector). The record the handlers keep, with the protocol's
// state (phase, pending calls, archived counts, caches), is not exported:
// it may change with the protocol without changing the API. Its JSON is a
// stored format, and records written by earlier versions are read by this
// one (testdata/records).
//
// # Permissions and approvals
//
// [Options.Permissions] (and a run's own, [RunOptions.Permissions]) decide
// which tool calls run, which are refused, and which wait for a person;
// a pre_tool_use hook may ask too ([HookAsk]). A call that waits is an
// approval request, which the stream yields as [EventApproval] events;
// package approval (github.com/calf-go/calf/agent/approval) reads the
// requests from the store, answers them from any process, and expires
// them. The agent's workers carry out the answers; a request past its
// [Permissions.ApprovalTimeout] is denied by a durable timer of its own.
//
// # Custom agents
//
// A custom agent ([NewCustom]) runs a Go step in place of a model call.
// Its step may call models ([StepContext.Generate]) and tools
// ([StepContext.CallTool]), which the stream yields as custom events
// (model_response, tool_call, tool_result) and which are recorded by run,
// step and call number, so that a step run again gets their answers
// without calling again; and it may ask a person
// ([StepContext.Approve]): the run waits, holding no goroutine, and the
// answer runs the step again. docs/sessions.md has the details.
//
// # Structured output
//
// When Out is not a string, the model is asked for JSON following Out's
// schema (see [tool.SchemaFor]); the answer is validated and decoded, and an
// invalid answer is sent back with the validation error, at most
// [Options.MaxRepairs] times. [Agent.RunStream] yields the output as it
// streams, as [EventPartialOutput] events whose [PartialOutput] holds an
// Out with the fields streamed so far.
//
// # Hooks, guardrails, budgets and retention
//
// A [Hook] runs at its [HookEvent] (a tool call's, or one about the
// agent) and returns a [HookDecision] made by [Allow], [Deny], [Skip],
// [Ask] (the call goes to approval), [TransformArguments],
// [TransformResult] or [TransformPrompt]. A [Guardrail] checks the input or
// the output, [JudgeGuardrail] with a model. A [Budget] bounds a run's
// usage and cost; [Runtime.SetBudget] and [Runtime.SetSessionBudget]
// change it while runs are in progress. [Options.SessionAnswersOnly] keeps
// in the session only the messages and the answers, not the tool traffic.
// [Runtime.Sweep] removes ended runs older than a retention, with the
// other records of the [store.Sweeper]s given to [Runtime.AddSweeper];
// [Runtime.Recording] reads a run's recorded model responses for a replay.
//
// Agents, teams and workflows share the run vocabulary (Submit, Wait, Run,
// RunStream, Cancel, Pause, Resume, DecodeOutput) and one error,
// [RunError], whose [RunRef] names the kind of runner; [SubmitRequest] and
// [RunRef] let [Runtime] control a run known only by name.
//
// # The engine
//
// For those who change it: the handlers are unexported, one file per
// concern, and not generic: they serve an agent's spec (agent.go), which
// is an [Agent] apart from its output type, with a function that checks
// that an answer decodes into that type. handlers.go has the input, tool
// call, tool result and approval handlers; inference.go's onInference runs
// the agent's stages in the order written once in inferenceStages, each
// stage in its feature's file (pause.go, guardrails.go, compaction.go,
// memory.go, budget.go, custom.go), and the stages of features an agent
// does not use are left out when it is served.
//
// agent/internal/engine holds what the handlers and the streams use that
// needs nothing of an agent's configuration or exported types: it makes a
// call once in a process and across processes (the rules under
// "Idempotency"), calls tools on kept goroutines and models and hooks
// within their timeouts, retries through outages, derives the ids of
// events and of linked runs, records a custom step's calls, watches and
// ends approval requests, and, for RunStream, restores causal order,
// follows a handoff chain and makes partial outputs of a streamed
// structured output. Its doc says what is still here and how it would
// move.
//
// Runs are read and written only through agent/internal/runstore, whose
// protocol is picked once per runtime (the fault tests run both, the other
// through a broker that does not say it is local). The stored run state
// (state.go) embeds the engine's Transcript, the conversation part of the
// record (a run's last messages, older ones archived in chunk records
// (run_messages), the session history it starts from, its compacted view),
// and its Lineage, the links to other runs (reply destination, parent,
// correlation, handoff chain), which hold the engine's own ReplyTo and Hop.
// Its other fields (status, tool calls, pending calls, budgets, the pause)
// hold this package's exported types. Its JSON is a stored format that
// TestStoredRecords reads from testdata/records. session.go records a run's
// start and end in its session through agent/internal/sessionstore;
// approval.go makes and carries out approval requests, whose answers are
// signals of their runs: approvalwait.go has a pending request's run wait
// for its answer through internal/signals, whose wake is the answer
// itself (on an in-process broker, the runtime reads the signals other
// processes sent from the store);
// customcalls.go makes a custom step's calls, recorded through the engine
// (kind custom_call); handoff.go and handoff_chain.go hand a run over and
// read a chain; subagent.go starts subagent runs and takes their outputs;
// quick.go serves on demand. OpenTelemetry goes through
// agent/internal/telemetry.
//
// The caller's side of a run: run.go has Run, its output and Cancel;
// submit.go the input event and Submit; startcheck.go the check that some
// process took a run; stream.go RunStream, with the engine's order told
// what each [Event] waits for by streamorder.go, partial.go making partial
// output events, and decodeevent.go turning each channel's message into an
// [Event]; runerror.go the errors of a run and [RunRef].
package agent
