// Package redis is a [store.Store] kept in Redis, for deployments in which
// several processes share their state.
//
// # Opening
//
// [Open] takes a redis://host:port/db URL (rediss:// for TLS; user and
// password may be in the URL, and its query may set client options such as
// client_name, read_timeout or pool_size) and optional [Options]. [New]
// wraps a go-redis client the caller already has. Several deployments can
// share one database: each uses its own [Options.KeyPrefix].
//
// # Keys
//
// With the default prefix "calf:", a record of kind "run" and id "r1" is
// the hash calf:r:3:run:r1 with the fields v (the version, in decimal), d
// (the data, byte for byte), t (when it was written, in Unix nanoseconds)
// and w (a token that identifies the write). The length before the kind
// keeps kinds and ids that contain ':' apart. Each kind also has a sorted
// set, calf:k:run, whose members are the ids of its records, all with
// score 0, so that they sort by their bytes: List is one ZRANGEBYLEX over
// it, and ids compare as Go strings do.
//
// # Atomicity
//
// Put and Delete are Lua scripts, run with EVALSHA and sent in full only
// when the server does not have them cached: each checks the version and
// updates both the record and its kind's set in one step, so that
// concurrent writers, in any number of processes, never both win. A List
// reads its page of ids and their records in one script as well, from one
// snapshot. A write carries a random token, so that when the client
// resends it after a connection was lost, the write that was already
// applied is recognised as such instead of reported as a conflict.
//
// With Redis Cluster, a record's key and its kind's set must be in one
// slot: give a KeyPrefix with a hash tag, such as "{calf}:", which puts
// every key of the Store in one slot.
//
// # Failures
//
// A lost connection is replaced on the next request. Errors from Redis
// are returned wrapped; an operation whose context is done returns the
// context's error at once, even while its request waits for a reply, and
// the request finishes on its own. As with any store over a network, a
// write cut short that way, or by a connection error, may or may not have
// been applied: read the record again to know.
package redis
