// Package recall gives agents memory beyond a session: things to
// remember, found again when they matter.
//
// A [Memory] takes items ([Memory.Add]), finds them ([Memory.Query]), and,
// as an [agent.Memory] in [agent.Options.Memory], adds what it finds to an
// agent's model calls ([Memory.UpdateContext]). Two are here:
//
//   - [Vector], a semantic memory: items are embedded by any
//     OpenAI-compatible /v1/embeddings endpoint ([openai.Embedder]) and
//     stored in the state store; a query is an exact nearest-neighbour
//     search over them. It suits thousands of items per namespace, not
//     millions.
//   - [Conversation], a memory of past exchanges: the prompt and the answer
//     of each completed run, per scope (an agent, a user), the latest of
//     which the next runs see.
//
// Both keep their items in any [store.Store] (memory, SQLite, PostgreSQL,
// Redis), so every worker sees the same memory.
package recall
