// Package e2e tests Calf across processes: the agent's handlers run in
// worker processes (the test binary started again in worker mode) on a
// shared broker and store, a worker is killed with SIGKILL at each step
// boundary of a run, and the tests check that every run completes on
// another worker without calling the model or a tool again for what was
// recorded. Workflow workers are killed the same way after a node, and
// across an interrupt resumed on another worker; workers serving a
// conversation host (package conversation) are killed in the middle of a
// turn, and the conversation goes on in the other. Workflow runs sleep as
// durable timers while their workers are killed in turns, the one that
// fires a timer right after it fires it, beside a process of another
// deployment on the same store (TestTimersAcrossKillNATSPostgres): every
// run goes on once. Three workers serving schedules start the runs of a
// schedule of a second, the one that fires every other firing's timer
// killed right after it publishes the firing, the one that carries out
// each other firing right after it starts the firing's run
// (TestScheduleFiringsAcrossKillNATSPostgres): each firing recorded
// starts one run, no other run starts, one runs after the other, and
// every run completes. calf worker processes serving an agent under flow
// control per key are killed while runs hold slots and others wait, and
// every run completes within the limit. The package holds tests only.
//
// The tests use the machine's NATS (127.0.0.1:4222), PostgreSQL
// (127.0.0.1:5432, database test) and Redis (127.0.0.1:6379), as the
// adapters' own tests do, and Kafka in the process of the test (kfake),
// which the workers reach over TCP; the timers, schedule and flow control
// tests start a NATS server and a PostgreSQL of their own, on ports
// outside the ephemeral range, and skip without PostgreSQL's programs
// unless CALF_TEST_SERVICES is set.
package e2e
