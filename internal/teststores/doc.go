// Package teststores opens, for tests, a new and empty store of each kind
// Calf has: memory, SQLite in a temporary directory, and the machine's
// PostgreSQL and Redis (CALF_TEST_POSTGRES_URL, CALF_TEST_REDIS_URL), each
// in a schema or key prefix of its own that is dropped when the test ends.
// A service that cannot be reached skips the test, or fails it when
// CALF_TEST_SERVICES is set.
package teststores
