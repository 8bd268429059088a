// Package tokens counts the tokens of model messages with the tokenizers
// of OpenAI's models (o200k_base and cl100k_base, embedded, from
// github.com/tiktoken-go/tokenizer), for [agent.Compaction]'s Estimate:
//
//	count, exact := tokens.ForModel("gpt-4o")
//	opts.Compaction = &agent.Compaction{Threshold: 100_000, Estimate: count}
//
// The vocabularies add some 10 MB to a program, which is why the agent
// package leaves them out and estimates by length unless given a counter.
package tokens
