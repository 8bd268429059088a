// Package session reads and changes the sessions agents keep in a
// [store.Store]: conversations that outlive their runs. A run names its
// session with agent's RunOptions.SessionID (a team's run with team's
// RunOptions.SessionID, a run at the protocol edges with runner's
// Options.SessionID); it starts from the session's messages, and when it
// completes it adds its own. The functions here take the store the runtime was made with
// (agent's Runtime.Store) and work the same on every store.
//
//	s, err := session.Load(ctx, rt.Store(), "chat-1")      // with its messages
//	page, err := session.List(ctx, rt.Store(), nil)        // newest first, a page at a time
//	fork, err := session.Fork(ctx, rt.Store(), "chat-1", &session.ForkOptions{At: 4})
//	data, err := session.Export(ctx, rt.Store(), "chat-1") // versioned JSON, for Import
//
// # Stored format
//
// A session is stored as a description ([store.KindSession]: title,
// times, counts, usage, allowed tools, compaction, the runs in progress)
// and parts of messages, one per run that added some, so that a run adds
// to a long session without rewriting it; an index orders the list. The
// description lists only its last parts and runs; the others are listed
// in chunk records written once each, so that what a turn writes stays
// the same size however long the session grows. These records are not
// part of the API: read a session through [Load], [LoadInfo] and [List],
// and move it between stores with [Export] and [Import].
//
// What only a run does to its session (marking its start and end, reading
// its messages through a runtime's cache) is the agent engine's; a
// session's budget is set with agent's Runtime.SetSessionBudget, which
// also tells the session's runs in progress.
package session
