// Package reactive is a typed state that changes only through named
// actions, each change a delta that subscribers see, here and in other
// processes through the broker; and agents that act when the state says
// they should.
//
// A [Store] holds a state S. [Action] registers what may change it;
// [Store.Dispatch] runs an action and returns its [Delta]: the paths it
// changed with their values before and after. [Store.Subscribe] follows
// paths ("agents.translator.*"). Actions return new states instead of
// changing the old (copy-on-write), so [Store.Get] hands out snapshots for
// free and a delta costs only what changed. A store persisted in a Calf
// state store ([Options.State]) is shared by every process that opens it,
// with compare-and-swap; its deltas go out on the broker
// ([Options.Client], [DeltaChannel]). [Mount] builds a state from parts,
// each with actions of its own.
package reactive
