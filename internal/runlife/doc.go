// Package runlife holds what every kind of run (an agent's, a team's, a
// workflow's) does the same way around its life, so that it is written
// once; the kinds supply what differs: their record's codec, their step,
// their channels and their children.
//
// # Waiting and serving
//
// [Wait] is a caller's wait for a run's end: follow the run's output
// channels and the dead letters ([Follow]), read the store again now and
// then while nothing is heard, give up on a run never recorded. [Served]
// serves a runner on demand once per runtime.
//
// # Run controls
//
// [Change] changes the record of a run that has not ended, in a
// compare-and-swap given as an [Update] (of a kind's [Records], read and
// written with its codec); a run that has ended is left alone and its
// error matches [ErrRunEnded] (agent.ErrRunEnded is the same value), one
// with no record matches store.ErrNotFound.
//
// # Pause and resume
//
// A run's record is a [Pausable]. [Pause] records a pause asked for; it
// takes effect at a step boundary, before the step starts ([TakeEffect]),
// and its pause event has the id [PauseID]. [Resume] forgets the pause,
// and counts a resume of a pause in effect with the step it lets go on;
// its events ([ResumeEvents]: the resume event under [ResumeID], then the
// step's event again under [ResumedID]) are sent after the record is
// written. Until the step has started, the record says that they may not
// all have been sent (Pausable.ResumeUnsent): a second resume, or a
// recovery, sends them again under the same ids.
//
// # Recovery
//
// [Recovery] walks the records of one kind of run and recovers each.
package runlife
