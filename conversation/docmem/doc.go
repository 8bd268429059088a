// Package docmem is a hierarchical document memory per conversation,
// durable in a [store.Store]: the docmem agent of the conversation
// architecture, as data and commands, served on a broker by a
// [host.Host] through [Memory.CodeHandler].
//
// A document is a tree of nodes, each a text; its root's text is the
// title. A conversation has any number of documents, each a record of kind
// [KindDocument] ("{conversation}/{doc}") that holds the whole tree.
//
// # Commands
//
// Every operation is a [Command], a small JSON object, so that a model or
// an agent in any language can send it:
//
//	{"command": "create",  "id": "c1", "doc": "project-notes", "text": "Project notes"}
//	{"command": "append",  "id": "c2", "doc": "project-notes", "parent": "root", "text": "Decisions"}
//	{"command": "insert",  "id": "c3", "doc": "project-notes", "parent": "root", "index": 0, "text": "Goals"}
//	{"command": "update",  "id": "c4", "doc": "project-notes", "node": "n1", "text": "Decisions taken"}
//	{"command": "move",    "id": "c5", "doc": "project-notes", "node": "n2", "parent": "n1"}
//	{"command": "delete",  "id": "c6", "doc": "project-notes", "node": "n2"}
//	{"command": "read",    "doc": "project-notes", "node": "n1"}
//	{"command": "outline", "doc": "project-notes"}
//	{"command": "find",    "doc": "project-notes", "text": "decision"}
//	{"command": "list"}
//
// [CommandFromArgs] makes one of the argument form a conversation
// message's command field carries (["docmem-create", "project-notes"]).
// [Memory.Handle] parses and applies one; [Memory.Apply] applies a
// [Command] built in Go. The answer is a [Result]: the node made or
// changed, a subtree as Markdown (read), the outline, the matches (find),
// or an error with its [Code]: unknown command, missing argument, unknown
// document or node, a node moved under itself, input over a bound (text,
// depth, nodes, document size: see the constants), control characters in
// an id. A failed command changes nothing.
//
// # Redelivery and concurrency
//
// A command that changes a document carries an id. The document keeps the
// ids of its latest [MaxApplied] commands with their results, and a
// command applied again returns its first result, marked Duplicate, and
// changes nothing; an id reused for another command is refused
// ([CodeIDReused]). Writers of one document take turns by compare-and-swap
// ([store.Update]), retrying on conflict.
//
// # The docmem agent
//
// [Memory.CodeHandler] is the [host.CodeHandler] of the docmem
// prototype: a conversation message's command (the argument form) or text
// (a JSON command) is applied with the message's correlation id as the
// command's id, and the answer is the [Result] as JSON.
package docmem
