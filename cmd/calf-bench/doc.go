// Command calf-bench measures what Calf costs on top of the model calls an
// agent makes, end to end, against a zero-latency OpenAI-compatible mock,
// or, with -model-delay, how close Calf comes to the throughput and
// latency that the model's own latency allows.
//
// Workload W1 is one agent, "calculator", with one tool, add(a, b int) int,
// and the task "add 2 and 3": the model first answers with the tool call
// add({"a":2,"b":3}), then, once the last message is the tool's result,
// with "The sum is " followed by that result. A run is two model calls and
// one tool call, and its output must be "The sum is 5"; every run is checked.
//
// Two systems do that work:
//
//   - the floor: a bare net/http client that sends the same two chat
//     completion requests, with hand-written JSON bodies of the shape the
//     model/openai adapter sends, decodes the answers with encoding/json and
//     adds the numbers itself;
//   - Calf: the agent served on the in-process broker (broker/memory) and a
//     state store (store/memory or store/sqlite), calling the mock through
//     model/openai (no retries), each run started with agent.Run.
//
// With -adapter, a third system, "adapter", makes the floor's two calls
// through model/openai (the adapter and the SDK it is built on) with
// nothing else of Calf, and adds the numbers itself: its figures against
// the floor's are what the adapter costs, and Calf's against the adapter's
// are what the broker, the store and the agent's handlers cost.
//
// With -skeleton, each store of -store also gets a "skeleton/STORE"
// system: the skeleton of a Calf run, which does on the in-process broker
// and the store what a W1 run of Calf's agent does there, and nothing else:
// the run's six events (input, inference, tool call, tool result,
// inference, output) through a calf.Client, each handler emitting the
// next, the four writes of the run's record (the JSON of W1's states,
// encoded once at start; the third, by the tool's handler, records the
// tool's result, as Calf does on the in-process broker), and the two
// model calls through model/openai. Its figures over the adapter's are the
// least the event model and the store cost a run, whatever the agent's
// own code does; Calf's over the skeleton's are that code.
//
// With -dist, Calf is also measured as a distributed system: worker
// processes (this binary, re-executed with -worker) serve the agent with
// agent.Serve on a shared broker and store, and this process, the caller,
// starts each run with agent.Run on its own client of the same broker and
// store. A setup is BROKER+STORE: nats (JetStream at -nats, default
// nats://127.0.0.1:4222) or kafka (an in-process franz-go kfake cluster
// that calf-bench starts itself), with postgres (-postgres, default
// postgres://127.0.0.1:5432/test) or redis (-redis, default
// redis://127.0.0.1:6379/0); -workers lists the numbers of worker
// processes (default 1,2). The report names each such system
// calf/SETUP/Nw. Every round of a distributed system starts its workers
// afresh, in a namespace of its own (a NATS stream and subject prefix, a
// kfake cluster, a PostgreSQL schema, a Redis key prefix), removed when the
// round ends; its allocations are the caller's only (and kfake's, which
// runs in this process).
//
// For each concurrency level the command alternates the systems over
// several rounds; each round warms up, then measures a fixed number of
// runs. It reports, per system, the time per run (wall time divided by
// runs), runs per second, p50 and p99 latency, the CPU time of this process
// per run (user and system time: the client side when the mock runs in
// another process, and a figure the other load of the machine hardly
// moves) and heap allocations per run, each the median over the rounds; and, for Calf, its overhead over
// the floor (per-run time / floor's - 1) and its throughput ratio (runs/s /
// floor's), next to the targets: overhead under 25% sequentially,
// throughput at least 80% of the floor's under concurrency.
//
// # Model latency
//
// With -model-delay D (for example 500ms), the mock answers each chat
// completion after D (or gives up as soon as the client goes away), as a
// real model would, and each round measures a time window instead of a
// number of runs. A W1 run then ideally takes 2 × D, its two model calls,
// and N concurrent callers (-concurrency, up to 1,000 and more) ideally do
// N / (2 × D) runs per second. Each caller starts a run as soon as its
// last one ends, the callers starting one after the other over 2 × D so
// that their runs do not end in bursts; once every caller has finished a
// first run (the warm-up), the window opens for -duration (default 10s),
// and the runs that end in it are measured. The report gives, per system
// and concurrency level: runs/s (the runs in the window that succeeded,
// their output checked as always, over the window), the ideal runs/s and
// the ratio to it, the ratio to the floor's runs/s, p50 and p99 latency,
// the ideal latency (2 × D) and p99's ratio to it, the CPU time of this
// process per run, and the runs validated, failed and timed out. A run
// that fails, or takes longer than -run-timeout (default 30s), counts as
// failed, in the window or not (warm-up, or the runs still going when the
// window closes, which are waited for); failures do not stop the
// benchmark, they are counted and the first one's error is printed, and
// the command then exits with status 1. The floor's figures show what the
// machine and the mock allow with the least client work; Calf's,
// including the distributed systems of -dist with their worker processes,
// what the framework's queues and bounds allow. The mock handles any
// number of connections, and every HTTP client of the benchmark keeps
// enough idle connections per host for the highest concurrency level,
// with no cap on connections per host. With -mock URL, start the mock
// with the same -model-delay: calf-bench -serve-mock -model-delay D.
//
// Two settings change how the runs are spread, and show under model
// latency: -serve-concurrency N sets agent.ServeOptions.Concurrency, the
// runs each of the agent's handlers works on at once in each process
// (default: the broker's Options.Concurrency, 1024 on every Calf broker);
// -partitions N (default 16) sets the partitions of the distributed
// brokers, which spread the runs over the workers but do not bound the
// runs in flight.
//
// Usage:
//
//	calf-bench [-runs N] [-concurrency 1,64] [-store memory,sqlite] [-adapter] [-skeleton] [-mock process|inproc|URL] [-rounds 3] [-json]
//	           [-dist nats+postgres,kafka+redis [-workers 1,2] [-nats URL] [-postgres URL] [-redis URL] [-partitions 16]]
//	           [-serve-concurrency N]
//	calf-bench -model-delay 500ms [-duration 10s] [-run-timeout 30s] [-concurrency 64,1000] [other flags but -runs and -warmup]
//	calf-bench -serve-mock [-model-delay D]
//
// By default the mock runs in a child process of the same binary, on a free
// loopback port, so that its work and allocations are not counted with the
// client's; -mock inproc serves it inside this process (allocations then
// include the mock's), and -mock URL uses a mock that is already running,
// such as one started with -serve-mock, which prints its base URL on the
// first line of its output and serves W1 until interrupted.
package main
