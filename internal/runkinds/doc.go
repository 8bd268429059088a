// Package runkinds holds the lifecycle conformance suite: the same cases
// (wait after submit, wait on an unknown id, a failed run, cancel with
// child runs of each kind, pause and resume at a step boundary with the
// resume sent twice, pause and resume across a restart, recovery after a
// process died with its broker's messages, budgets) run on an agent's, a team's and a
// workflow's runs, through each kind's Submit and Wait and the runtime's
// one by-name surface (agent.Runtime's LoadRun, Cancel, Pause, Resume and
// SetBudget). It has no code of its own: the suite is its tests.
package runkinds
