// Package tokens counts the tokens of model messages with the tokenizers
// of OpenAI's models (o200k_base and cl100k_base, embedded, from
// github.com/tiktoken-go/tokenizer), for the Estimate of an agent's compaction (package agent/compaction):
//
//	count, exact := tokens.ForModel("gpt-4o")
//	opts.Compaction = &compaction.Config{Threshold: 100_000, Estimate: count}
//
// The vocabularies add some 10 MB to a program, which is why the agent
// and compaction packages leave them out and estimate by length unless
// given a counter.
package tokens
