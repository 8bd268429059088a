// Package chaos tests that Calf's runs survive outages of the services
// around them: private PostgreSQL, Redis and NATS servers, started by the
// test on ports of their own, are stopped, killed and paused at random
// under a load of W1 runs served by worker processes, and a verifier checks
// every run. The package holds tests, and the private services they
// start, which the kill tests of internal/e2e start too ([StartPostgres],
// [StartNATS]).
//
// # What runs
//
// The test starts, in a temporary directory, the services of one backend
// pair (NATS with JetStream and PostgreSQL 15 or Redis 7), each on a free
// port of 127.0.0.1: never the machine's shared services, whose ports
// (5432, 6379, 4222) are never touched. PostgreSQL runs as the postgres
// user when the test runs as root, with trust authentication and its
// socket in the temporary directory; Redis appends every write to its AOF
// file with fsync always; NATS is the test binary started again as a
// server (the module's nats-server, embedded, with its JetStream store in
// the temporary directory), so that it can be killed and restarted on the
// same port and store. Worker processes (the test binary started again)
// serve W1's agent, whose model calls the add tool and then answers with
// the sum, against a fake OpenAI-compatible server in the test process.
// Callers in the test process run W1 runs, one after the other each, until
// the load window ends.
//
// An injector takes one service down at random intervals for a random
// time, both drawn from a seeded generator whose seed the test logs:
//
//	stop   the service's own immediate shutdown: SIGQUIT for PostgreSQL
//	       (what pg_ctl stop -m immediate sends), SIGTERM for Redis and NATS
//	term   its graceful shutdown: SIGINT for PostgreSQL (pg_ctl stop -m
//	       fast), SIGTERM for Redis and NATS
//	kill   SIGKILL of the service's process group
//	pause  SIGSTOP of the process group, then SIGCONT
//
// A stopped or killed service is started again on the same port and data
// once its outage has lasted its time; the outage ends when it answers
// again.
//
// # What is checked
//
// Each run must give its caller exactly one output, the correct one; a
// caller's error is recorded and classified (parked, not served, timeout,
// failed, infrastructure). The workers report each execution of the add
// tool; the fake model counts its calls by run and step. At the end the
// verifier checks:
//
//   - every run ended with its correct output at its caller, and its
//     output was published on the agent's output channel;
//   - no tool result recorded was executed again (an execution of add that
//     starts after the run's second model call), and no recorded model
//     response was requested again (a first-step call after add ran, a
//     second-step call after the output reached the caller); repeats before
//     a record are counted apart, as the at-least-once delivery allows them
//     only when the worker that made the call died;
//   - in the store-outage subtests (nats+postgres, nats+redis) and
//     nats-cluster, where no worker dies, no repeat at all: add ran once per tool call and the
//     model was asked once per step, however often a message was delivered
//     again (agent's flights and claims);
//   - no dead letter was lost: every message the brokers logged as parked
//     has its record in the store (package deadletter), and no broker
//     logged a dropped dead letter;
//   - no caller waited past the end of the load window plus the grace
//     period;
//   - no run was cancelled as not served (workers serve the agent
//     throughout, so the start check must never conclude otherwise).
//
// TestClusterMembersSurviveFailover, beside the suite, kills the node
// leading the bucket of leases of a three-node cluster twice while a
// group is served, and checks that GroupMembers never counts it empty.
//
// After the load, every dead letter not yet replayed is replayed, and the
// runs it held up are awaited in the store: they count as replayed, and a
// run that ends nowhere counts as lost. The test prints a table of figures
// (runs, completed, parked, replayed, lost, errors by kind, recovery after
// each outage, p50 and p99: from the outage's end to the next run that
// completes; after a worker kill, until every run the worker had in hand
// was handled again by another) and fails when a run was lost, doubled,
// parked without a long outage, or waited past the bound.
//
// # Running it
//
// The short form runs with the package's tests (not with -short), about a
// minute per subtest. They skip when PostgreSQL 15's or Redis's binaries
// are missing, unless CALF_TEST_SERVICES is set, which makes that a
// failure:
//
//	go test -count=1 -run TestChaos -v ./internal/chaos
//
// Its subtests are nats+postgres and nats+redis (the store taken down),
// nats-restart (NATS taken down, on PostgreSQL), worker-kill (three
// workers, one killed with SIGKILL every 3 to 8 seconds and started
// again) and nats-cluster (NATS as a cluster of three nodes routed to
// each other, the stream and the bucket of leases with three replicas,
// as docs/deploy.md runs it; a node killed with SIGKILL every 5 to 10
// seconds and started again 2 to 6 seconds later; no repeat allowed, as
// no worker dies). Every service listens on a port between 20000 and
// 32000, outside the ephemeral range, where a client reconnecting to a
// killed server could otherwise hold its port. The long form is the same
// test with more load for longer, chosen by environment variables:
//
//	CALF_CHAOS_DURATION  the load window (default 30s)
//	CALF_CHAOS_CALLERS   concurrent callers (default 30)
//	CALF_CHAOS_WORKERS   worker processes (default 2; 3 for worker-kill)
//	CALF_CHAOS_SEED      the injector's seed (default: from the clock)
//	CALF_CHAOS_GAP       time between outages, MIN-MAX (default 5s-15s)
//	CALF_CHAOS_OUTAGE    an outage's length, MIN-MAX (default 500ms-5s)
//	CALF_CHAOS_ACTIONS   the injector's actions, comma-separated (default
//	                     stop,kill,pause for a store, kill,pause for NATS)
//	CALF_CHAOS_GRACE     how long callers may wait past the window
//	                     (default 1m)
//	CALF_CHAOS_MODEL_DELAY  the fake model's latency (default 20ms)
//	CALF_CHAOS_KILL_RECOVERY  a bound on the 99th percentile of the
//	                     recovery after a worker kill (default: reported,
//	                     not checked)
//	CALF_CHAOS_OUTAGE_BUDGET  the workers' outage budget (the nats URL's
//	                     outage_budget; default calf.DefaultOutageBudget)
//	CALF_CHAOS_PARKED_OK set to 1 when outages outlast the outage budget:
//	                     parked runs are then expected, and must all be
//	                     brought home by the replay
//	CALF_CHAOS_LOGS      a directory to keep the workers' logs in (default:
//	                     a temporary one, removed after the test)
//	CALF_CHAOS_DEBUG     set to log at debug level in the workers (partitions
//	                     taken over, among others)
//
// For instance, the benchmark of docs/benchmarks.md:
//
//	CALF_CHAOS_DURATION=3m CALF_CHAOS_CALLERS=500 \
//	  go test -count=1 -timeout 60m -run 'TestChaos/nats\+postgres' -v ./internal/chaos
//
// and the cluster's long form, a node killed every 10 to 20 seconds (on
// 2 shared cores: 8 kills, 24,117 runs, every one completed, none
// cancelled as not served, no tool executed or model step asked twice):
//
//	CALF_CHAOS_DURATION=3m CALF_CHAOS_CALLERS=500 CALF_CHAOS_GAP=10s-20s \
//	  go test -count=1 -timeout 60m -run 'TestChaos/nats-cluster' -v ./internal/chaos
package chaos
