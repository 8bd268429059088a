// Package adapters opens Calf's brokers and state stores by URL.
//
// A program that picks its broker and store from configuration, such as
// the calf command, its benchmark, or a user's own worker, calls
// [OpenBroker] and [OpenStore] with URLs instead of wiring each adapter by
// hand. The scheme of the URL chooses the adapter from a literal table:
//
//	broker URL                              adapter
//	memory://                               broker/memory, in this process only
//	nats://HOST:PORT[,HOST:PORT...]         broker/nats on a NATS server or cluster
//	nats+embedded://PATH                    broker/nats on a NATS server embedded
//	                                        in this process, storing in PATH
//	kafka://HOST:PORT[,HOST:PORT...]        broker/kafka
//
//	store URL                               adapter
//	memory: or memory://                    store/memory, gone when the process exits
//	sqlite:PATH                             store/sqlite; an empty PATH is
//	                                        sqlite.DefaultPath
//	postgres://... or postgresql://...      store/postgres
//	redis://... or rediss://...             store/redis
//
// The query of a nats URL may set partitions=N, replicas=N (the stream's
// replication factor on a cluster), outage_budget=DURATION (how long a
// handler failing for want of the store or the broker is retried before
// its message may be parked; default calf.DefaultOutageBudget),
// stream=NAME and prefix=TOKEN (the
// JetStream stream and the first token of its subjects: two deployments
// on one NATS server need different ones). The query of a
// kafka URL may set what broker/kafka's ParseURL reads: partitions,
// replication_factor, topic_prefix, max_attempts, concurrency and the
// group timings. Every process that shares a broker must use the same
// values. Kafka URLs take no credentials: a program that needs SASL or TLS
// opens broker/kafka itself with its client options.
//
// A postgres URL takes libpq's parameters (sslmode, application_name,
// search_path, ...) and schema=NAME, the schema that holds Calf's tables,
// created if it does not exist (postgres://calf@db:5432/app?schema=calf).
// Without schema, the tables go in the first schema of the search_path
// that exists, usually public; when none of them exists, the first one is
// created, or opening fails with an error that names it. pool_max_conns=N
// bounds the process's connections (default
// [github.com/calf-go/calf/store/postgres.DefaultMaxConns]).
//
// A password in a URL (in its user information, or in the password and
// sslpassword query parameters) never appears in an error: [Redact]
// replaces it, and errors from the adapters are scrubbed of it.
//
// # Why a package of its own
//
// The root package and the role packages (store, broker adapters) must not
// import each other's adapters: that is the dependency rule. Only programs
// wire several adapters together. This package is that wiring, once, so
// that the calf command, the benchmark and users' programs accept the same
// URLs with the same errors. The price is that importing it links every
// adapter (NATS, Kafka, PostgreSQL, Redis, SQLite); a program that needs
// one adapter and a small binary imports that adapter directly.
package adapters
