// Package runkinds holds the lifecycle conformance suite: the same cases
// (wait after submit, wait on an unknown id, a failed run, cancel with
// child runs of each kind, pause and resume at a step boundary with the
// resume sent twice, pause and resume across a restart, recovery after a
// process died with its broker's messages, budgets) run on an agent's, a
// team's and a workflow's runs, through each kind's Submit and Wait and
// the runtime's one by-name surface (agent.Runtime's LoadRun, Cancel,
// Pause, Resume, SetBudget and Signal). The cases of durable time (a
// signal while the run waits, one sent before it waits, a wait that times
// out, a sleep, signals to ended and unknown runs) run on a custom
// agent's run, a team's of that agent, and a workflow's function node
// (TestTimeLifecycle). It has no code of its own: the suite is its tests.
package runkinds
