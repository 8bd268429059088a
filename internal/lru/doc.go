// Package lru is a cache that, when full, evicts the entry used least
// recently: the one bounded cache of the module's in-process caches
// (decoded run states, sessions' messages, unsaved tool results, event
// log heads), so that a cache under pressure keeps the entries in use
// rather than losing arbitrary ones.
//
// A [Cache] bounds its entries by count and, optionally, by a cost the
// caller gives each entry (such as its size in bytes). It is not safe for
// concurrent use: its callers guard it with the lock they already hold.
package lru
