// Calf runs AI agents as event handlers on a pub-sub broker.
//
// With no other configuration, calf runs in one process on an in-memory
// broker and keeps state in a SQLite file. The only thing to bring is a
// model: an OpenAI API key, or the base URL of any OpenAI-compatible server
// (Ollama, vLLM, llama.cpp).
//
// Usage:
//
//	calf run [AGENT FLAGS] [--store URL] [--broker URL] [--serve] [--wait] [--session ID] [--json | -q] [--record] [--retention D] PROMPT...
//	calf chat [AGENT FLAGS] [--store URL] [--session ID] [--retention D]
//	calf chat --conversation ID [--broker URL] [--user U] [--store URL] [--agents FILE] [--root DIR] [--model M] [--max-turns N] [--timeout D] [--hook H] [--mcp S]
//	calf serve [AGENT FLAGS] [--addr ADDR] [--token TOKEN] [--store URL] [--broker URL] [--serve] [--retention D]
//	calf worker --broker URL [AGENT FLAGS] [--agent NAME] [--store URL] [--concurrency N] [--max-attempts N] [--drain D] [--record] [--retention D] [-q]
//	calf mcp serve [AGENT FLAGS] [--http ADDR] [--token T] [--store URL] [--broker URL] [--serve]
//	calf a2a serve [AGENT FLAGS] [--addr ADDR] [--url URL] [--token T] [--store URL] [--broker URL] [--serve]
//	calf a2a send [--context ID] [--no-stream] [--token T] URL TEXT
//	calf events --broker URL [--agent NAME] [--run ID] [--json]
//	calf trace [--store URL] RUN
//	calf replay [AGENT FLAGS] [--store URL] [--keep] RUN
//	calf eval [AGENT FLAGS] [--store URL] [--broker URL] [--serve] [--id ID] [--concurrency N] [--tag T] [--judge MODEL]
//	          [--json FILE] [--junit FILE] [--baseline FILE] SET
//	calf runs list [--status S] [--agent NAME] [--limit N] [--json] [--store URL]
//	calf runs show [--store URL] ID
//	calf runs pause --broker URL [--store URL] [--reason R] ID
//	calf runs resume --broker URL [--store URL] ID
//	calf runs cancel --broker URL [--store URL] [--reason R] ID
//	calf runs signal [--broker URL] [--store URL] [--text] [--idempotency-key KEY] ID NAME [VALUE]
//	calf schedules add --agent A|--team T|--workflow W --cron EXPR|--every D [--tz ZONE]
//	                   [--prompt P] [--state JSON] [--overlap O] [--catch-up C] [--window D] [--store URL] NAME
//	calf schedules list [--json] [--store URL]
//	calf schedules show [--store URL] NAME
//	calf schedules pause [--store URL] NAME
//	calf schedules resume [--store URL] NAME
//	calf schedules rm [--store URL] NAME
//	calf schedules trigger --broker URL [--store URL] [--idempotency-key KEY] NAME
//	calf wakeups list --agent NAME --session ID [--json] [--store URL]
//	calf wakeups cancel [--store URL] ID
//	calf deadletters list [--json] [--store URL]
//	calf deadletters show [--raw] [--store URL] ID
//	calf deadletters replay --broker URL [--store URL] ID [ID...]
//	calf deadletters replay --broker URL [--store URL] --all | [--agent NAME] [--channel PATTERN]
//	                        [--since TIME] [--until TIME] [--error TEXT]
//	calf approvals list [--run ID] [--all] [--json] [--store URL]
//	calf approvals show [--store URL] ID
//	calf approvals approve [--broker URL] [--store URL] [--arguments JSON] [--message M] [--digest D] ID
//	calf approvals deny [--broker URL] [--store URL] [--message M] [--digest D] ID
//	calf prototypes add [--replace] [--store URL] FILE
//	calf prototypes list [--json] [--store URL]
//	calf prototypes show [--json] [--store URL] NAME
//	calf prototypes rm [--store URL] NAME
//	calf conversations create [--user U] [--description D] [--entry NAME] [--json] [--store URL]
//	calf conversations list [--json] [--store URL]
//	calf conversations show [--json] [--store URL] ID
//	calf conversations stop [--broker URL] [--json] [--store URL] ID
//	calf conversations restart [--json] [--store URL] ID [INSTANCE...]
//	calf conversations send [--broker URL] [--user U] [--wait D] [--json] [--store URL] [--agents FILE] [--root DIR] [--model M] [--max-turns N] [--timeout D] [--hook H] [--mcp S] ID MESSAGE
//	calf version
//
// AGENT FLAGS configure the agent (see calf run): --model, --system,
// --max-turns, --timeout, --read, --edit, --bash, --web, --mode, --hook and
// --mcp; or, in place of the built-in assistant, the agents of a
// prototypes file: --agents FILE, --root DIR and (but for calf worker)
// --agent NAME. Every command takes -h for its whole help.
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
// A call of a tool the agent does not have shows where it happened, as a
// failed call:
//
//	→ fetch_url
//	← error: unknown tool "fetch_url"; this agent has no tools
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
//	                    openai-responses:NAME  OpenAI's Responses API
//	                    anthropic:NAME  Anthropic, such as anthropic:claude-sonnet-4-5
//	                    gemini:NAME     Google's Gemini, such as gemini:gemini-2.5-flash
//	                    ollama:NAME     a local Ollama server ($OLLAMA_HOST, default
//	                                    127.0.0.1:11434)
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
//	--hook EVENT[:MATCHER]=COMMAND
//	                  run a command as a hook (repeatable; docs/tools.md)
//	--mcp NAME=COMMAND|NAME=URL
//	                  give the agent an MCP server's tools, named NAME__TOOL
//	                  (repeatable; docs/protocols.md)
//	--agents FILE     run an agent of a prototypes file (YAML, as calf
//	                  prototypes add takes; docs/conversations.md) instead of
//	                  the built-in assistant: the agent is named after its
//	                  prototype and has the prototype's system prompt, model
//	                  (by name, as --model takes it; --model for a prototype
//	                  that names none), built-in tools, MCP servers and
//	                  permissions; --max-turns, --timeout, --hook and --mcp
//	                  apply to it, while --system, --read, --edit, --bash,
//	                  --web and --mode are refused. Its subagents are for
//	                  conversations (calf worker --agents), so it runs
//	                  without the start_conversation and send tools. A file
//	                  with problems is refused (status 2), each problem with
//	                  its line. The same for calf chat, serve, mcp serve and
//	                  a2a serve
//	--agent NAME      with --agents, the prototype to run (default: the
//	                  file's first llm prototype)
//	--root DIR        with --agents, the directory the prototypes' file
//	                  tools (read_file, write_file...) and bash work in;
//	                  required by a prototype that has them
//	--record          record the run's events in the store (its event log),
//	                  for calf trace
//	--retention D     remove the runs that ended longer ago than D (default
//	                  168h; 0 keeps every run), with their tool results,
//	                  approvals and event logs, as the command starts, about
//	                  once an hour at most across the processes sharing the
//	                  store; sessions are kept
//
// # calf chat
//
// Chat is a conversation with the agent in the terminal: the answer streams
// as the model writes it, tool calls and their results show as they happen,
// and a call that needs approval is asked about in place (y allows it, n
// denies it, a allows the tool for the rest of the session). The
// conversation is a session kept in --store; --session ID resumes one.
// Slash commands: /new, /sessions, /resume ID (which shows the session's
// last messages), /fork (a copy named ID-fork, titled as the session with
// " (fork)"), /cost, /model [MODEL], /help, /quit. It takes the agent flags
// and --retention of calf run.
//
// With --conversation ID it is the user's side of a conversation (calf
// conversations create) instead: the exchanges so far with the
// conversation's entry instance are shown first, each line typed is the
// user's message to it, and what comes back (its answers, and the errors
// by which a message is refused) is shown as it comes; a stopped
// conversation takes no message. /history shows the exchanges again,
// /quit leaves.
//
//	--conversation ID  talk in the conversation ID
//	--broker URL      the workers' broker (calf worker --agents), which
//	                  serve the conversation; without it, this process
//	                  serves it on the prototypes registered in --store,
//	                  after registering those of --agents FILE, their
//	                  agents made as calf worker makes them (--root,
//	                  --model, --max-turns, --timeout, --hook, --mcp); it
//	                  first carries on the messages whose answers an earlier
//	                  process left in progress, so that those queued behind
//	                  them follow
//	--user U          the user's id on the messages (default: the
//	                  conversation's user; another user's conversation is
//	                  refused)
//
// # calf serve
//
// Serve offers the agent over HTTP (docs/serve.md): the OpenAI-compatible
// API at http://ADDR/v1 (the agent's name is the model), the web chat at /,
// the run inspector, AG-UI and run event streams. It takes the agent flags,
// --store, --broker, --serve and --retention of calf run, and:
//
//	--addr ADDR       listen on ADDR (default 127.0.0.1:8420)
//	--token TOKEN     require a bearer TOKEN or USER:TOKEN (repeatable;
//	                  default $CALF_SERVE_TOKEN); required when --addr is not
//	                  a loopback address
//
// With the tokens of several users, the file and bash tools of each user's
// runs work in DIR/users/NAME beneath --read, --edit or --bash, a directory
// of that user's own (mode 0700, the name escaped so that it leads nowhere
// else), --bash needs bubblewrap, and --root (whose directory the --agents
// prototypes' tools share) is refused.
//
// With --agents FILE it offers the file's conversations too
// (docs/conversations.md): the conversations API under /v1/conversations
// and the conversations of the web chat. It registers the file's
// prototypes in --store, as calf worker --agents does, and on the
// in-process broker serves them in this process, carrying on first the
// messages whose answers a previous process left in progress; on a shared
// broker it serves them with --serve, and otherwise calf worker --agents
// processes do.
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
//	--agent NAME      serve the agent NAME (repeatable)
//	--agents FILE     serve the llm prototypes of a prototypes file as
//	                  agents named after them (--agent chooses among them;
//	                  default all), register the file's prototypes in
//	                  --store (replacing those of the same names), and
//	                  serve conversations (docs/conversations.md): every
//	                  conversation channel, the llm instances as agents
//	                  named conv-PROTOTYPE, a code prototype named
//	                  docmem-agent as the docmem agent (other code
//	                  prototypes are refused in conversations), with the
//	                  MCP servers of their prototypes and the agent flags
//	                  --max-turns, --timeout, --hook and --mcp. --root DIR
//	                  is the directory of their file tools and bash
//	--record          record the events of the runs in the store (their
//	                  event logs), for calf trace and event streams
//	--retention D     remove the runs that ended longer ago than D, checked
//	                  every hour (see calf run)
//	-q, --quiet       log only warnings and errors
//
// It logs to standard error and records every dead letter in the store.
// SIGINT or SIGTERM drains it: no new message is taken, the handlers in
// progress finish (up to --drain), every message not handled is left to
// the other workers, and the worker exits with status 0. A second signal
// ends it at once.
//
// # calf mcp serve and calf a2a
//
// mcp serve offers the agent to MCP clients as a tool named after it, on
// standard input and output, or with --http ADDR as streamable HTTP at
// http://ADDR/mcp (then with a bearer token, --token or $CALF_MCP_TOKEN,
// required off loopback). a2a serve offers it as an A2A 1.0 agent over
// JSON-RPC and REST on --addr (default 127.0.0.1:8809), its card giving
// --url as the base URL clients reach (default http://ADDR), with a bearer
// token (--token or $CALF_A2A_TOKEN) required off loopback. a2a send sends
// TEXT to the A2A agent at URL and prints its answer; --context ID
// continues a conversation, --no-stream waits for the answer instead of
// streaming, --token is the bearer token. See docs/protocols.md.
//
// # calf events, calf trace and calf replay
//
// events follows the events of the agents on a shared broker (--broker) as
// they happen, one line each (--json: the messages as JSON), of every agent
// or of --agent NAME, of every run or of --run ID and the runs it started.
// trace prints the causal tree of a run's recorded events (its event log:
// calf serve records it, calf run and calf worker with --record), with
// timings. replay runs a recorded run again in this process, each model
// call answered with the response the run recorded, the tools run again
// with the agent flags given (--agents FILE for a prototype's run), on an
// in-memory store: --store is only read, unless --keep is given: it records the
// replay there as RUN.replay.N. See docs/observability.md.
//
// # calf runs
//
// Runs reads and steers the agent, team and workflow runs of --store
// (docs/runs.md): list prints the newest (--status, --agent, --limit,
// --json), show prints one's view as JSON (an agent run's with its whole
// conversation); pause, resume and cancel act on one through --broker, the
// workers' broker (--reason is recorded with the run). A workflow run is
// paused and resumed here, but cancelled by a program that has its
// workflow (status 2). An unknown id is an error (status 1). signal sends
// the signal NAME to a run, with VALUE as its value: JSON, or, with
// --text given, text; a run that has ended is an error (status 1). With
// --idempotency-key KEY, the same signal sent again under KEY is
// delivered once, and another signal under it is refused.
//
// # calf schedules
//
// Schedules starts runs on a clock (docs/runs.md). add NAME stores a
// schedule of the agent --agent A, the team --team T or the workflow
// --workflow W, with --prompt P (an agent's or a team's) or
// --state JSON (a workflow's), at the times of --cron EXPR (five fields
// or @daily and the like, in the IANA time zone --tz ZONE, default UTC)
// or every --every D; --overlap skip|buffer_one|allow says what a firing
// does while the last run is in progress (default skip), --catch-up
// none|last|all what is done with the firings missed while no worker ran
// (default none; all within --window D, default 24h). list prints the
// schedules with their next firings, show one with its last firings, as
// JSON; pause, resume and rm act on one in --store; trigger fires one
// now, through --broker, the workers' broker; with --idempotency-key KEY,
// a trigger sent again under KEY fires nothing more and prints the run
// of the first. The workers (calf worker)
// carry out the firings: each starts one run, whichever worker is up.
//
// # calf wakeups
//
// Wakeups lists (list --agent NAME --session ID, --json for JSON lines)
// and cancels (cancel ID) the follow-ups that agents given wake-ups
// scheduled in their sessions: timers in --store that start the
// session's next turn with the model's note when due.
//
// # calf deadletters
//
// Deadletters reads the dead letters the workers recorded in --store:
// list prints a table (ID, CHANNEL, GROUP, ATTEMPTS, ERROR, TIME,
// REPLAYED), oldest first, or one JSON object per line with --json; show
// prints one as JSON, or with --raw the original message's data byte for
// byte; replay publishes the original message again on its channel on
// --broker and marks the record replayed (replaying it again does
// nothing). Replay takes several ids, or a selection of the dead letters
// not yet replayed: --all, or the filters --agent (an agent's, team's or
// workflow's), --channel (a channel pattern), --since and --until (RFC 3339
// times, or durations ago such as 2h) and --error (text of the error),
// which may be combined. It prints a line per dead letter; an unknown id,
// or one that could not be replayed, makes it fail (status 1), and running
// it again replays only what is left.
//
// # calf approvals
//
// Approvals reads the approval requests of agents with permissions (tool
// calls that wait for a person) in --store: list prints the pending ones
// as a table (ID, AGENT, TOOL, KIND, ARGUMENTS, STATUS, REQUESTED), with
// --all the answered ones too (and, as cancelled, those whose runs ended
// before an answer), or one JSON object per line with --json;
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
// approved. A second answer, an unknown id, another digest, or a request
// whose run has ended (cancelled, timed out, failed: nothing would carry
// out the answer) is an error (status 1).
//
// # calf prototypes and calf conversations
//
// Prototypes keeps the agent prototypes that conversations are made of in
// --store (docs/conversations.md): add registers every prototype of a
// YAML file, checked whole first: a file with problems is refused with
// every problem listed with its line (status 2), and nothing is registered;
// so is a file that names prototypes registered already, unless
// --replace is given. list prints them as a table (NAME, KIND, MODEL, TOOLS,
// SUBAGENTS, ROLE), or one JSON object per line with --json; show prints
// one (--json: as JSON); rm removes one.
//
// Conversations creates and reads the conversations of --store: create
// makes one for --user with --description, its instance of the --entry
// prototype (default conversational-agent, which must be registered) and
// the topic between the user and that instance, and prints its id and the
// channels the user sends on and reads the answers on; list prints them
// (ID, USER, STATUS, CREATED, ENTRY, FAILED: the failed instances, their
// number and the first one's error, DESCRIPTION); show prints one with its
// instances (with each failed one's error) and topics; stop stops it and
// its instances; restart puts its failed instances (or those named) back
// to work, since messages never restart one. With --broker,
// the workers' broker, stop also cancels the runs in progress of its
// instances and, on Kafka, deletes its channels; without it only the
// records change. --json prints JSON instead of text. calf worker --agents
// FILE serves the conversations.
//
// Send sends MESSAGE as the user's message in the conversation ID and
// prints the answer of its entry instance (--json: the answer's
// conversation message as JSON), for scripts. An error answer (a failed
// run, say) is printed on standard error with status 1, as is a stopped
// conversation, before anything is sent, and no answer within --wait D
// (default 5m). --broker and --user, and the flags of a conversation
// served in this process, are those of calf chat --conversation.
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
//	ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL   the key and API of anthropic:NAME
//	GEMINI_API_KEY (or GOOGLE_API_KEY), GEMINI_BASE_URL   the same for gemini:NAME
//	OLLAMA_HOST       the Ollama server of ollama:NAME
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
//
// # Inside the command
//
// For those who change it: every command is listed above
// (TestDocListsEveryCommand checks it). The conversation commands are in
// prototypes.go and conversations.go; chat --conversation in chatconv.go,
// which with conversations send uses convlink.go (the user-to-entry and
// entry-to-user channels: with --broker the workers', without it a
// host.Host in the process). One function, newHost in agents.go,
// makes the host of worker, serve and the in-process commands, its agents
// made by host.NewAgent with the prototypes' MCP servers and the
// agent flags; serveHost serves it and, on the in-process broker, calls
// Host.Recover. userroot.go gives each user of serve a directory of their
// own, the user travelling with the run as its dependencies. --retention
// sets the workers' WorkerOptions.Retention.
package main
