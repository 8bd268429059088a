// Package eval checks what agents, teams and workflows do against eval
// sets: cases, each an input with what a good run of it looks like.
//
// A [Set] is read from a file ([Load]): YAML (one document with a name
// and its cases) or JSON Lines (one case per line). A [Case] gives the
// input, an optional conversation before it, and any of: checks on the
// final answer ([Expect]: equality, substrings, a regular expression, a
// JSON Schema, fields of a structured answer), the expected tool
// trajectory ([Trajectory]: exact, in order, in any order, a subset or a
// superset of the calls made, arguments compared exactly or as a JSON
// subset), budgets of cost, tokens, model calls and latency ([Budget]),
// tags, and how many times to repeat it.
//
// [Score] scores one run, [Observed] (what the run answered, the tools it
// called, what it spent, how long it took), against a case, and returns a
// [Result] with one [Check] per expectation, each saying what it found
// when it fails. [FromRunInfo] makes an Observed of an agent's recorded
// run. A case repeated n times, of which c passed, is summarized by
// [PassAtK] (the chance that at least one of k tries passes) and
// [PassHatK] (the chance that all k do).
//
// [Run] runs a set as ordinary runs of a runner (an agent, a team, a
// workflow) on a runtime, so that any process serving the runner takes
// them, scores them, has a [Judge] decide on the rubrics, and returns a
// [Report], which is JSON and JUnit XML ([Report.WriteJUnit]). [Compare]
// compares a report with a stored baseline case by case, for a gate that
// fails on a regression.
package eval
