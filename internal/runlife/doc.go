// Package runlife holds what every kind of run (an agent's, a team's, a
// workflow's) does the same way around its life, so that it is written
// once: a caller's wait for a run's end ([Wait]: follow the run's output
// channels and the dead letters, read the store again now and then while
// nothing is heard, give up on a run never recorded) and serving a runner
// on demand once per runtime ([Served]). The kinds supply what differs:
// how their record is read, which dead letter holds their run up, what
// they follow.
package runlife
