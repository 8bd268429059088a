// Package runstore is how the agent engine reads and writes its runs and
// their tool results: the one place that knows the run protocol's records
// (kind [store.KindRun], a run's state; kind [store.KindToolResult], a
// tool's result recorded on its own; kind [KindRunMessages], a long run's
// archived messages) and the two ways of keeping them.
//
// A Store follows the shared store protocol (storedRuns), which every
// process of a distributed deployment follows, or its shortcut for a
// broker in the process (localRuns: the copy of a run this process
// created is trusted, and a tool's result goes into the run's own record
// with the step's advance); which one is picked once, by New. A Cache
// keeps the decoded states of recently active runs, so that a run the
// process wrote or read a moment ago is not decoded again and can be
// written at its known version without being read first.
//
// The store is generic over the engine's run state S and tool result R:
// package agent supplies what it needs to know of them (Runs: decode,
// copy, encode, read back and archive; whether a run's model call is due,
// whether it waits for tool results, the result it holds for a call) and
// what takes a result into a run (Taker). Its error messages are the
// engine's, prefixed "agent:".
package runstore
