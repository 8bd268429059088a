// Package httperr is the one table that maps errors to HTTP answers at
// Calf's HTTP edge: the server package (the OpenAI-compatible API, AG-UI,
// runs, sessions, conversations), and the authentication and version
// refusals of the A2A server and of the MCP server's HTTP transport.
//
// # The table
//
// [Of] answers an error by the first row it matches:
//
//	413 request_too_large  *http.MaxBytesError, calf.ErrMessageTooLarge
//	408 request_timeout    ErrRequestTimeout
//	401 invalid_api_key    ErrUnauthorized (with WWW-Authenticate)
//	403 forbidden          ErrForbidden
//	405 method_not_allowed ErrMethodNotAllowed
//	429 rate_limit_exceeded ErrTooManyRequests (with Retry-After)
//	400 invalid_request    ErrBadRequest, runner.ErrThread, store.ErrInvalidKey, schedule.ErrInvalid, *tool.ArgumentError
//	503 unavailable        calf.IsUnavailable: an outage (with Retry-After)
//	409 approval_pending   *ApprovalPendingError: the run waits for answers
//	409 run_parked         agent.ErrRunParked: replay the dead letter
//	404 not_found          store.ErrNotFound (and every package's not-found error, which matches it)
//	409 idempotency_conflict agent.ErrIdempotencyConflict: the key was used with another request
//	409 conflict           ErrConflict, store.ErrConflict, agent.ErrRunEnded, approval.ErrRunEnded, approval.ErrAnswered, schedule.ErrExists
//	500 internal           anything else
//
// A handler that knows more than the kind of its error gives an [*Error]:
// its Kind picks the row, and its Type, Code and Message replace the row's.
// An outage outranks not found and conflict: a store that cannot be
// reached says nothing about the record asked for, and the client should
// try again, not give up.
//
// The body is the OpenAI API's error object, which every endpoint of the
// server answers with:
//
//	{"error": {"message": "…", "type": "invalid_request_error", "param": null, "code": "not_found"}}
package httperr
