// Package server offers Calf agents, teams and workflows over HTTP.
//
// [New] takes the runners to serve ([runner.Agent], [runner.Team],
// [runner.Workflow]) on a runtime; [Server.ListenAndServe] serves them.
// The OpenAI-compatible API lets any OpenAI client talk to them, the
// agent's name standing for the model:
//
//   - GET /v1/models lists the runners;
//   - POST /v1/chat/completions and POST /v1/responses run one, with
//     "stream": true for server-sent events of the answer's text as the
//     model writes it.
//
// A request is stateless unless it carries the [SessionHeader]
// (Calf-Session-Id): the run then continues that Calf session, whose
// history the agent keeps, and only the request's last message (the
// user's) is read. Without it, the request's messages are the
// conversation (system and developer messages, then user and assistant
// turns, the last one the user's). A client's tools, tool messages, other
// content than text, and n > 1 are refused with a 400: the agent's tools
// are its own. Sampling settings are the agent's and are ignored. The
// response names the run in the [RunHeader] (Calf-Run-Id).
//
// # Security
//
// A server listens on 127.0.0.1 by default. Without [Options.Tokens] it
// serves one user, [LocalUser], refuses to listen beyond loopback
// ([CheckAddr]) and answers only requests whose Host is a loopback name,
// so that a web page cannot reach it through DNS rebinding. With tokens,
// every request needs "Authorization: Bearer TOKEN", and a session belongs
// to the user that started it: another user's requests find no such
// session (its owner is kept in a [KindSessionOwner] record). Cross-origin
// requests from browsers that change state are refused; bodies are bounded
// in size ([Options.MaxBodyBytes]) and in time ([Options.BodyTimeout]),
// a request refused for its token, host or rate being answered before its
// body is read; and each user's requests are rate-limited
// ([Options.RateLimit]). Errors have the OpenAI API's shape:
// {"error": {"message", "type", "code"}}, their status chosen by one table
// for every endpoint: 400 for a request to change, 404 for what does not
// exist (or is another user's), 409 for a conflict, a run waiting for
// approvals or held up by a parked message, 503 with Retry-After while the
// store or the broker cannot be reached, 500 for a failure (docs/serve.md,
// "Errors", lists them all).
//
// Closing a request's connection before its run ends cancels the run.
//
// With an event log ([Options.Log]), a request that does not stream and
// whose run parks on an approval request is answered at once: 409, code
// "approval_pending", naming the run and the approvals (run_id,
// approvals); the run waits for the answer, given over the WebSocket
// bridge (GET /v1/ws).
//
// # Conversations
//
// With [Options.Conversations] (a host.Host, serving in this
// process or in others on the same broker), the server offers the
// conversations of package conversation to its users: POST
// /v1/conversations creates one, owned by the token's user; GET
// /v1/conversations lists the user's; GET /v1/conversations/{id} reads one
// with its instances, topics and user-facing history (the user's messages
// and the messages to the user, [ConversationEntry]); POST
// /v1/conversations/{id}/messages sends the user's message to the entry
// instance; POST /v1/conversations/{id}/stop stops it; POST
// /v1/conversations/{id}/instances/{instance}/restart puts a failed
// instance (status error, its error in GET's instances) back to work. Another user's
// conversation is not found (404). The histories are
// [KindConversationHistory] records, kept by [Server.RecordConversations]
// from the user's channels whoever sends on them. Over the WebSocket
// bridge, a page follows a conversation (its history, then each message,
// and its entry instance's run events as progress) and talks to it; the
// web chat opens conversations (?conversation=ID).
//
// # The web chat, the inspector and event streams
//
// The web chat at / talks to agents, teams and workflows (server/web:
// plain JavaScript embedded in the binary; common.js holds the token, the
// API calls and the WebSocket bridge over GET /v1/ws, which queues
// messages until the socket opens and reconnects; markdown.js renders
// answers as DOM nodes, never as HTML). GET /v1/sessions and
// GET /v1/sessions/{id} list the user's sessions and read one, its runs as
// turns with their usage and approvals. The run inspector at /inspect.html
// lists runs (GET /v1/runs, GET /v1/runs/{id}), draws the live topology of
// a run's events with their payloads, and shows dead letters
// (GET /v1/deadletters) with replay (POST /v1/deadletters/{id}/replay).
// POST /agui/{agent} speaks AG-UI from the event log, approvals as
// interrupts; GET /v1/runs/{id}/events streams a run's events. These
// streams, and the OpenAI-compatible API's, are read from the event log
// and resume from a Last-Event-ID; the [OnDisconnectHeader] (Calf-On-Disconnect)
// chooses what a closed connection does to the run. Without [Options.Log] the
// server records an event log of its own from New. [Options.Deps] gives
// the dependencies of a user's runs.
//
// # Schedules and follow-ups
//
// The schedules of package schedule, which start runs on a clock, are
// served under /v1/schedules: GET lists the user's, each with its next
// firing, whether it is paused and its last firings with the runs they
// started ([ScheduleView]); GET /v1/schedules/{name} reads one; POST
// creates one from a JSON spec ([ScheduleRequest]: 400 saying what is
// wrong with a spec, 409 for a name taken); POST
// /v1/schedules/{name}/pause, /resume and /trigger control one; DELETE
// /v1/schedules/{name} removes it. A schedule belongs to the user who
// created it (a [KindScheduleOwner] record), and so do the runs it
// starts; another user's is not found (404). [New] has the server carry
// out the firings, in the group every process serving schedules shares.
// The run inspector lists the schedules. GET /v1/sessions/{id}/wakeups
// lists the follow-ups the server's agents scheduled in a session of
// the user (their tool schedule_wakeup, [agent.WakeUps]), and DELETE
// /v1/sessions/{id}/wakeups/{wakeup} cancels one; the web chat shows
// the session's, each with a Cancel button.
package server
