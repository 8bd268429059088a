// Package runner gives agents, teams and workflows one shape for the
// protocol edges that offer them to the outside (MCP, A2A): a prompt in,
// a Calf run, text out, with the run's events as progress along the way,
// its status readable from the store at any time, and a way to cancel it.
//
// [Runs] lists the agent and team runs of a store, filtered, newest first,
// for the people looking at them (calf runs list, the server's run
// inspector).
package runner
