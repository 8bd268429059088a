// Package e2e tests Calf across processes: the agent's handlers run in
// worker processes (the test binary started again in worker mode) on a
// shared broker and store, a worker is killed with SIGKILL at each step
// boundary of a run, and the tests check that every run completes on
// another worker without calling the model or a tool again for what was
// recorded. Workflow workers are killed the same way after a node, and
// across an interrupt resumed on another worker; workers serving a
// conversation host (package conversation) are killed in the middle of a
// turn, and the conversation goes on in the other; calf worker processes
// serving an agent under flow control per key are killed while runs hold
// slots and others wait, and every run completes within the limit. The
// package holds tests only.
//
// The tests use the machine's NATS (127.0.0.1:4222), PostgreSQL
// (127.0.0.1:5432, database test) and Redis (127.0.0.1:6379), as the
// adapters' own tests do, and Kafka in the process of the test (kfake),
// which the workers reach over TCP. The flow control test starts a NATS
// server and a PostgreSQL of its own, on free ports outside the ephemeral
// range.
package e2e
