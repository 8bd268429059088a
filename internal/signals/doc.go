// Package signals keeps the signals sent to runs: named values, each a
// record of kind "signal" under "{run key}/{name}/{seq}", where the run
// key names the run with its kind and runner ("workflow/{name}/{run}",
// "agent/{name}/{run}") and seq orders the signals of one name (the
// time sent, in nanoseconds on 19 digits, and a random suffix). A signal
// is kept in the store until its run is swept ([Sweep], called by the
// retention sweep of agents' and workflows' runs): a run that waits
// takes the first signal of the name after the last it took, so a
// signal sent before the wait is delivered when the run waits, and each
// signal is taken once. A signal sent under a position given with
// [WithSeq] (a caller's idempotency key keeps the position of its first
// request) is recorded once: sent again, it is the one recorded, and the
// waiting run is woken again, which changes nothing for a wait it had
// answered.
//
// Two kinds of wait take signals. A [Wait] is code that waits and runs
// again (a workflow node's WaitSignal, a custom agent's step): its call
// is recorded ([KindCall]), with what answered it, and a cursor per name
// ([KindCursor]) says which signals the run took. A wait that one signal
// ends for good, whose answer its own record keeps (an approval request,
// whose signal [ApprovalName] names; a workflow's interrupt), is lighter:
// [Await] records only its waiter, [Answer] sends its signal once, and
// [Answered] ends it. Either way the waiter ([KindWaiter]) names the wake
// event that runs the waiting code again; waiting holds no goroutine and
// no message. Names that begin with [Reserved] are Calf's own: callers
// cannot send them ([CheckSent]).
//
// A signal sent by a process whose broker reaches no other process
// ([Env.Local]) to a run that waits is also indexed ([KindWoken]): the
// process that serves the run, on an in-process broker of its own over
// the same store, reads that index ([Watch]) and emits the wake itself.
package signals
