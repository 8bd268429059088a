// Package local makes runtimes that carry out agents, teams and workflows
// in the calling process, on an in-process broker (package broker/memory)
// and an in-memory store (package store/memory): for programs that run
// their agents themselves, their tests and their examples.
//
// [Runtime] returns the process's runtime, made on first use; [New] makes
// a fresh one, for a test that wants runs and handlers of its own. Both
// serve on demand ([agent.RuntimeOptions.ServeOnDemand]): the first Run,
// RunStream, Submit or Recover of an agent, a team or a workflow on the
// runtime serves it there, with every agent its runs may delegate to (its
// handoff targets, subagents and task agents, and theirs), so the quick
// path needs no Serve, for one agent or many:
//
//	a := agent.Must(agent.NewText("geographer", m, "Answer briefly."))
//	out, err := a.Run(ctx, local.Runtime(), "What is the capital of France?", nil)
//
// Nothing of these runtimes outlives the process. Runs that must survive
// a restart or spread over workers need a runtime of the program's own:
// [agent.NewRuntime] over a broker that other processes share and a
// durable store (store/sqlite, store/postgres), with the agents served by
// workers ([agent.Worker]).
//
// Package agent, which is given a runtime everywhere, does not import
// this one: brokers and stores are adapters, wired together by programs,
// their tests and this package.
package local
