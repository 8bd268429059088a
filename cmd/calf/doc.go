// Calf runs AI agents as event handlers on a pub-sub broker.
//
// With no other configuration, calf runs in one process on an in-memory
// broker and keeps state in a SQLite file. The only thing to bring is a
// model: an OpenAI API key, or the base URL of any OpenAI-compatible server
// (Ollama, vLLM, llama.cpp).
//
// Usage:
//
//	calf run [flags] PROMPT...
//	calf worker --broker URL [flags]
//	calf deadletters list [--json] [--store URL]
//	calf deadletters show [--raw] [--store URL] ID
//	calf deadletters replay --broker URL [--store URL] ID
//	calf approvals list [--run ID] [--all] [--json] [--store URL]
//	calf approvals show [--store URL] ID
//	calf approvals approve [--broker URL] [--store URL] [--arguments JSON] [--message M] [--digest D] ID
//	calf approvals deny [--broker URL] [--store URL] [--message M] [--digest D] ID
//	calf version
//
// # calf run
//
// Run runs an agent named "assistant" once on PROMPT (its words joined with
// spaces; "-" reads the prompt from standard input) and streams its
// answer's text to standard output as it arrives. Each tool call and its
// result are shown on standard error, one line each:
//
//	→ read_file {"path":"go.mod"}
//	← 12 lines
//
// The flags:
//
//	--model SPEC      the model (default $CALF_MODEL, else openai:gpt-4o-mini):
//	                    openai:NAME     an OpenAI model, such as openai:gpt-4o-mini
//	                    NAME            the same, or a model of the server at
//	                                    $OPENAI_BASE_URL (llama3.2, qwen2.5:7b)
//	                    URL             the base URL of an OpenAI-compatible server,
//	                                    such as http://127.0.0.1:11434/v1; the model is
//	                                    the first one the server lists at GET URL/models
//	                    URL#NAME        model NAME on that server
//	--store URL       where state lives (default sqlite:):
//	                    sqlite:PATH     a SQLite file; an empty PATH means
//	                                    $XDG_DATA_HOME/calf/calf.db, or
//	                                    ~/.local/share/calf/calf.db
//	                    memory:         in memory, gone when calf exits
//	                    postgres://USER@HOST:PORT/DB   PostgreSQL
//	                    redis://HOST:PORT/DB           Redis
//	--broker URL      the broker (default memory://):
//	                    memory://                   in this process
//	                    nats://HOST:PORT[,HOST:PORT] a NATS JetStream server
//	                                                or cluster
//	                    nats+embedded://DIR         a NATS server inside this
//	                                                process, storing in DIR
//	                    kafka://HOST:PORT[,HOST:PORT] a Kafka cluster
//	                  With a broker other processes reach (nats://, kafka://)
//	                  the run is carried out by the calf worker processes
//	                  serving the agent there; this process starts it and
//	                  follows its events, needs no model, and --store must
//	                  name the workers' store. --model, --system,
//	                  --max-turns, --read, --edit, --bash, --web and --mode
//	                  configure the agent, so they are refused there: give
//	                  them to calf worker.
//	--serve           serve the agent in this process too, on a shared
//	                  broker (on memory:// and nats+embedded:// it always is)
//	--wait            on a shared broker with no calf worker serving the
//	                  agent, wait for one to start (up to --timeout) instead
//	                  of failing after a few seconds with an error that names
//	                  the agent's input channel
//	--system TEXT     the agent's instructions (default: a short
//	                  helpful-assistant prompt)
//	--session ID      continue the conversation ID kept in the store; the run
//	                  sees its history and its messages are added to it
//	--timeout D       bound on the whole run (default 10m)
//	--max-turns N     bound on the model calls of the run (default 20)
//	--read DIR        give the agent the read-only file tools read_file,
//	                  list_dir, glob and grep, confined to DIR; without it
//	                  (or the three below) the agent has no tools
//	--edit DIR        the file tools with write_file and edit_file too,
//	                  confined to DIR
//	--bash DIR        the bash tool, running commands in DIR (in a
//	                  bubblewrap sandbox where bubblewrap is installed)
//	--web             the web_fetch tool (public addresses only)
//	--mode MODE       the permission mode: ask, accept_reads, accept_edits
//	                  or bypass (default accept_edits with --edit, --bash or
//	                  --web). A call the mode does not accept waits for
//	                  approval: calf run asks on standard input (y runs it,
//	                  anything else refuses it); when standard input carried
//	                  the prompt, is closed, or --json is set, it says how to
//	                  answer with calf approvals from another terminal, and
//	                  waits; with --store memory: (where no other process
//	                  can answer) the call is refused
//	--json            print every event of the run (input, inference, delta,
//	                  tool_call, tool_result, output) as one line of JSON on
//	                  standard output, ending with the output event; "data"
//	                  holds the event's payload as described in docs/channels.md
//	-q, --quiet       print only the final answer
//
// # calf worker
//
// Worker serves the handlers of the agents named by --agent (default
// "assistant", the agent calf run runs; repeat the flag for several) on
// the broker --broker, which must be one that other processes reach, with
// state in --store, which they share (not memory:). Start as many workers as the load needs: they share
// the broker's consumer groups. It takes the agent flags of calf run
// (--model, --system, --max-turns, --timeout, --read, --edit, --bash,
// --web, --mode) and:
//
//	--concurrency N   bound on the model and tool calls the worker makes
//	                  at once across its agents, so on the runs it works
//	                  on at once (default 1024); partitions do not bound it
//	--max-attempts N  deliveries of a failing message before it is parked
//	                  on the dead-letter channel (default 5)
//	--drain D         how long handlers in progress may take to finish
//	                  after SIGINT or SIGTERM (default 30s)
//	-q, --quiet       log only warnings and errors
//
// It logs to standard error and records every dead letter in the store.
// SIGINT or SIGTERM drains it: no new message is taken, the handlers in
// progress finish (up to --drain), every message not handled is left to
// the other workers, and the worker exits with status 0. A second signal
// ends it at once.
//
// # calf deadletters
//
// Deadletters reads the dead letters the workers recorded in --store:
// list prints a table (ID, CHANNEL, GROUP, ATTEMPTS, ERROR, TIME,
// REPLAYED), oldest first, or one JSON object per line with --json; show
// prints one as JSON, or with --raw the original message's data byte for
// byte; replay publishes the original message again on its channel on
// --broker and marks the record replayed (replaying it again does
// nothing). An unknown id is an error (status 1).
//
// # calf approvals
//
// Approvals reads the approval requests of agents with permissions (tool
// calls that wait for a person) in --store: list prints the pending ones
// as a table (ID, AGENT, TOOL, KIND, ARGUMENTS, STATUS, REQUESTED), with
// --all the answered ones too, or one JSON object per line with --json;
// show prints one as JSON. approve and deny record the answer and publish
// it on --broker, the workers' broker, where a worker runs the call (with
// --arguments, a JSON object, instead of the requested ones) or tells the
// model it was denied (--message). Without --broker (the embedded default:
// a calf run, chat or serve on memory:// with the SQLite file), the answer
// is only recorded in --store, and the process whose run waits, which
// reads the requests its runs wait for every second, carries it out; give
// the --store of that process. --digest binds the answer to the
// request as it was shown (calf approvals show); without it the stored
// request's digest is used, and the command prints the arguments it
// approved. A second answer, an unknown id or another digest is an error
// (status 1).
//
// # calf version
//
// Version prints calf's version (set at link time with
// -ldflags "-X main.version=v1.2.3", else the module version of the build,
// else "(devel)") and the Go version and platform it was built with.
//
// # Environment
//
//	OPENAI_API_KEY    the key sent to OpenAI, or to the server of --model URL
//	                  or $OPENAI_BASE_URL
//	OPENAI_BASE_URL   the base URL of an OpenAI-compatible server, used with a
//	                  model given as NAME or openai:NAME
//	CALF_MODEL        the default of --model
//	XDG_DATA_HOME     where the default SQLite file lives
//
// Without OPENAI_API_KEY and without a base URL (from --model or
// OPENAI_BASE_URL), calf says what to set and exits with status 2.
//
// # Exit status
//
// 0 on success, and for a worker that drained cleanly; 1 when a command
// fails (calf prints "calf: <error>" on standard error); 2 for bad
// arguments or missing configuration; 130 when interrupted (Ctrl-C, which
// cancels the run).
package main
