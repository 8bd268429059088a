// Package compaction holds the strategies that keep an agent run's context
// within a budget of tokens, and their configuration: set a [Config] as
// the agent's Options.Compaction, and before a model call whose messages
// are estimated at more than [Config.Threshold] tokens, the agent hands
// the older messages to the [Compactor] and the model sees what it
// returns in their place, followed by the latest messages as they are.
//
//	opts := &agent.Options{Compaction: &compaction.Config{
//		Threshold: 100_000,
//		Compactor: compaction.Summarize(cheapModel, ""),
//	}}
//
// Two strategies come with it: [DropToolResults] (the default, no model
// call) and [Summarize] (a model writes a summary of the older messages);
// a [Func] is any other. [EstimateTokens] estimates a message's size by
// its length; the package model/tokens counts with the tokenizers of
// OpenAI's models instead ([Config.Estimate]).
//
// When to compact, the record of a compaction in the run's state and its
// session ([Record]), and the event that reports it belong to the agent
// package, which uses this one; this package does not know about runs.
package compaction
