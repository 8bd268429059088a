// Package timers keeps durable timers in a store and fires them: at its
// due time, a timer emits one event (its channel, data, key and metadata,
// under an id of its own) through a client, from whichever process runs
// the firing loop on the store.
//
// A timer is two records: the timer itself (kind "timer", under its id)
// and an entry in an index by due time (kind "timer_due", "{due}/{id}",
// with the due time in nanoseconds on 19 digits), so that the due timers
// are read from the front of the index, a page at a time, on every store
// (its List is ordered by id), never by a scan of every timer. No
// goroutine and no message is held per timer: a million pending timers
// cost the store a million pairs of records and the process nothing.
//
// Firing takes a lease on the entry with a compare-and-swap, so that of
// processes sharing the store one fires each timer; it then emits the
// event, and removes the timer and its entry. A process killed between the
// emit and the removal leaves the lease to run out ([Options.Lease]), and
// another process fires the timer again with the same event id: a timer
// fires at least once, and its event is the same each time, so that the
// handler that takes it (which records what it did, as every handler of
// Calf does) acts once. Lateness: a timer started in the process that
// runs the loop fires at once when due; one started elsewhere within
// [Options.Poll]; one whose firer died within [Options.Lease] more.
//
// A pass takes the due timers a page of the index at a time
// ([Options.Page]): their leases are written together, their timers read
// together, their events emitted one after the other in the order of the
// index, and the timers then their entries removed together, so that a
// backlog of overdue timers costs a store that batches concurrent
// operations (PostgreSQL, SQLite) a few round trips a page rather than a
// few a timer. A page whose events outlast its leases stops there, and
// the rest are taken again.
//
// A timer is not fired through a broker that would drop its event: one
// that keeps nothing for a channel nobody subscribes to (the in-process
// broker; NATS, whose stream keeps a message only for the consumers that
// match it) and says so with a Subscribed(channel) bool method. The timer
// then waits for a subscriber, or for a process sharing the store whose
// broker has one, instead of being removed with its event lost.
package timers
