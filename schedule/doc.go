// Package schedule starts runs of agents, teams and workflows on a
// clock: at the times of a cron expression (five fields or a descriptor
// such as @daily, in a time zone) or at an interval.
//
//	sched := schedule.New(rt, nil)
//	if err := sched.Serve(ctx); err != nil { ... }
//	_, err := sched.Add(ctx, schedule.Spec{
//		Name: "morning-digest", Kind: "agent", Runner: "digest",
//		Prompt: "Summarize yesterday's tickets.",
//		Cron: "0 9 * * 1-5", TimeZone: "Europe/Paris",
//	})
//
// A schedule is a record in the runtime's store (kind "schedule", under
// its name), and its next firing a durable timer ([agent.Timer]): no
// goroutine waits for it, it survives restarts, and whichever process
// serves schedules ([Scheduler.Serve]) when it is due carries it out.
// Each firing starts a normal run whose id derives from the schedule and
// the time ([RunID]), so that a firing carried out twice (two processes,
// or one killed midway) starts one run; what a firing decides (which of
// the firings due start runs) is written before its runs start
// ([Schedule.Pending]), so that carried out again later, once the next
// firings are due, it starts the same runs and no other.
//
// The overlap policy ([Spec.Overlap]) says what a firing does while the
// schedule's last run is still in progress: skip it (the default), keep
// it until that run ends (one at most), or start it anyway. The catch-up
// policy ([Spec.CatchUp]) says what a schedule does with the firings it
// missed while nothing fired timers: none of them (the default; a firing
// late by less than [Spec.Tolerance] still runs), the last, or all of
// them within [Spec.Window]. Pause, Resume, Delete and Trigger (fire now,
// once) control a schedule from any process; a schedule's record keeps
// its last firings ([Schedule.History]): when each was due, the run it
// started, or why it started none. [Scheduler.TriggerWith] takes the
// caller's idempotency key ([TriggerOptions]): a trigger sent again under
// it, within the runtime's idempotency window, fires nothing more and
// returns the run of the first.
package schedule
