// Package flow holds the runs of a runner (an agent, a team, a workflow)
// to limits per key, enforced across every process that serves it:
// concurrency, rate, debounce and priority (agent.FlowControl is the
// user's side of it).
//
// A [Gate] stands in front of the runner's input handler. A run that
// already has a record goes through (a message delivered again, a run
// submitted again). A new run is recorded as waiting: its input message
// in a KindWait record whose id orders the key's waiting runs (priority,
// then the time the input was published), an entry in the KindActive
// index of keys, and a KindRun record under its run id, which a caller's
// wait for the run reads to wait through the queue (runlife.Wait's
// Queued). Nothing else holds it: no goroutine, no message in flight.
//
// A run starts when [Gate.Pass] (every process's loop, each poll, and the
// input handler at once) admits it: a compare-and-swap of the key's
// KindKey record adds the run to the runs holding a slot, if the key's
// concurrency and rate allow. The rate limit is throttled's generic cell
// rate algorithm, whose one number of state lives in the same record, so
// that slot and rate are taken together or not at all. The admitted
// run's input is handed to the input handler in the process that admitted
// it, then its waiting records are deleted: a process that dies in
// between leaves them, and the next pass hands the input on again (the
// handler takes a run once). A slot belongs to the run: the pass frees the
// slots of runs whose record says they have ended, so a run carried on by
// another process after its first one died keeps its slot until it ends.
//
// Debounce keeps the last input of a key's burst in a KindDebounce record
// with the time its window ends (each input moves it); the input it
// replaces is ended at once, cancelled with the id of the run that
// replaced it, and its caller answered. When the window is over, a pass
// makes the last input wait as any other, under the key's limits.
package flow
