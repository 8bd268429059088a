// Package launcher turns a program's main into a command line for its own
// agents, teams and workflows, in one line:
//
//	func main() { launcher.Main(context.Background(), &launcher.Config{Runners: runners}) }
//
// The program then has the subcommands
//
//   - run PROMPT: one run of an agent, team or workflow (--agent NAME;
//     default the first), its answer streamed to standard output;
//   - chat: a terminal chat, each line of standard input a message of one
//     session (--session ID continues one);
//   - serve: the OpenAI-compatible API, the web chat at / and the run
//     inspector at /inspect.html (package server), with the event log
//     they read recorded in the store; on loopback by default, and beyond
//     it only with bearer tokens (--token, $CALF_SERVE_TOKEN);
//   - worker: the program's runners served on a shared broker and store
//     until SIGINT or SIGTERM, for run, chat and serve processes on the
//     same --broker and --store to start runs on.
//
// Every subcommand takes --broker and --store, by default the embedded
// default of the calf command: an in-memory broker and SQLite in the
// default file. With [Config.Model], --model names the model the
// program's runners are made with (package model/models).
//
// The runners are [runner.Runner]s made by [runner.Agent], [runner.Team]
// and [runner.Workflow]: the one shape of the three kinds at Calf's
// protocol edges. They are served on a runtime that serves on demand, so
// a team's member agents and a workflow's agent nodes need not be listed.
//
// [Run] is the testable form of [Main]: the arguments, standard input and
// output, and an exit code.
//
// Like package local and the calf command, the launcher wires adapters
// together (brokers and stores by URL, through package adapters): it is
// one of the packages the dependency rule lets do so, and agent, team,
// workflow and runner do not import it.
package launcher
