package httperr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// Kinds of errors of the edge itself, for the rows of the table that no
// package's error names. An error made with fmt.Errorf("%w: …", kind)
// answers with its text after "kind: ".
var (
	ErrBadRequest       = errors.New("bad request")
	ErrUnauthorized     = errors.New("unauthorized")
	ErrForbidden        = errors.New("forbidden")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrRequestTimeout   = errors.New("request timeout")
	ErrConflict         = errors.New("conflict")
	ErrTooManyRequests  = errors.New("too many requests")
)

// DefaultRetryAfter is the Retry-After of an outage whose error does not
// say how long to wait: long enough for a store that restarts or fails
// over, short enough that a client does not wait for nothing.
const DefaultRetryAfter = 2 * time.Second

// Error is an error of a request that says more than its kind: the code
// and message its answer gives. Kind picks the table's row (nil: 500);
// Type and Code, when set, replace the row's. It matches Kind with
// errors.Is.
type Error struct {
	Kind    error
	Type    string
	Code    string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// ApprovalPendingError ends the wait of a request that does not stream,
// whose run parked on approval requests: the run waits for their answers,
// and is not over.
type ApprovalPendingError struct {
	RunID     string
	Approvals []approval.Approval
}

func (e *ApprovalPendingError) Error() string {
	return fmt.Sprintf("run %s waits for %d approval(s)", e.RunID, len(e.Approvals))
}

// Body is the JSON body of an error answer.
type Body struct {
	Error Object `json:"error"`
}

// Object is the error of a [Body], in the OpenAI API's shape.
type Object struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code,omitempty"`
	// RunID and Approvals, for a run parked on approval requests or held
	// up by a parked message.
	RunID     string            `json:"run_id,omitempty"`
	Approvals []PendingApproval `json:"approvals,omitempty"`
}

// PendingApproval is an approval request a run waits for, in an error.
type PendingApproval struct {
	ID        string          `json:"id"`
	RunID     string          `json:"run_id"`
	ToolName  string          `json:"tool_name"`
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason,omitempty"`
}

// Answer is the HTTP answer to an error.
type Answer struct {
	Status int
	// RetryAfter, when positive, is sent as the Retry-After header, in
	// whole seconds rounded up.
	RetryAfter time.Duration
	Body       Body
	// Unexpected reports an error that matched no row and came with no
	// *Error: a failure of the server, which its caller should log.
	Unexpected bool
}

// row is a row of the table: the errors it matches and their answer.
type row struct {
	status    int
	typ, code string
	match     func(error) bool
	// message, when set, is the answer's message for err; otherwise
	// err.Error() without its kind's prefix.
	message func(err error) string
}

// is matches the errors that match one of kinds.
func is(kinds ...error) func(error) bool {
	return func(err error) bool {
		for _, k := range kinds {
			if errors.Is(err, k) {
				return true
			}
		}
		return false
	}
}

func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

const (
	invalidRequest = "invalid_request_error"
	serverError    = "server_error"
)

// table is the one mapping of errors to HTTP status codes; the first row
// an error matches answers it. See the package documentation.
var table = []row{
	{status: http.StatusRequestEntityTooLarge, typ: invalidRequest, code: "request_too_large", match: func(err error) bool {
		return as[*http.MaxBytesError](err) || errors.Is(err, calf.ErrMessageTooLarge)
	}, message: func(err error) string {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Sprintf("the request body is over %d bytes", tooBig.Limit)
		}
		return err.Error()
	}},
	{status: http.StatusRequestTimeout, typ: invalidRequest, code: "request_timeout", match: is(ErrRequestTimeout)},
	{status: http.StatusUnauthorized, typ: invalidRequest, code: "invalid_api_key", match: is(ErrUnauthorized)},
	{status: http.StatusForbidden, typ: invalidRequest, code: "forbidden", match: is(ErrForbidden)},
	{status: http.StatusMethodNotAllowed, typ: invalidRequest, code: "method_not_allowed", match: is(ErrMethodNotAllowed)},
	{status: http.StatusTooManyRequests, typ: "rate_limit_exceeded", code: "rate_limit_exceeded", match: is(ErrTooManyRequests)},
	{status: http.StatusBadRequest, typ: invalidRequest, code: "invalid_request", match: func(err error) bool {
		return is(ErrBadRequest, runner.ErrThread, store.ErrInvalidKey, schedule.ErrInvalid)(err) || as[*tool.ArgumentError](err)
	}},
	{status: http.StatusServiceUnavailable, typ: serverError, code: "unavailable", match: calf.IsUnavailable, message: func(err error) string {
		return "a service the server needs cannot be reached for now; retry after the Retry-After delay: " + err.Error()
	}},
	{status: http.StatusConflict, typ: invalidRequest, code: "approval_pending", match: as[*ApprovalPendingError], message: approvalMessage},
	{status: http.StatusConflict, typ: invalidRequest, code: "run_parked", match: is(agent.ErrRunParked), message: func(err error) string {
		return err.Error() + ". Once its cause is fixed, replay the dead letter (POST /v1/deadletters/{id}/replay; GET /v1/deadletters lists them; or calf deadletters replay ID): the run then goes on"
	}},
	{status: http.StatusNotFound, typ: invalidRequest, code: "not_found", match: is(store.ErrNotFound)},
	{status: http.StatusConflict, typ: invalidRequest, code: "idempotency_conflict", match: is(agent.ErrIdempotencyConflict)},
	{status: http.StatusConflict, typ: invalidRequest, code: "conflict", match: is(ErrConflict, store.ErrConflict, agent.ErrRunEnded, approval.ErrRunEnded, approval.ErrAnswered, schedule.ErrExists)},
}

// fallback answers an error that matches no row.
var fallback = row{status: http.StatusInternalServerError, typ: serverError, code: "internal", message: func(err error) string {
	return "the server failed: " + err.Error()
}}

// Of returns the answer to err, by the first row of the table it matches.
func Of(err error) Answer {
	r, matched := fallback, false
	for _, t := range table {
		if t.match(err) {
			r, matched = t, true
			break
		}
	}
	a := Answer{Status: r.status, Body: Body{Error: Object{Type: r.typ, Code: r.code}}}
	var e *Error
	switch {
	case errors.As(err, &e):
		a.Body.Error.Message = err.Error()
		if e.Type != "" {
			a.Body.Error.Type = e.Type
		}
		if e.Code != "" {
			a.Body.Error.Code = e.Code
		}
		a.RetryAfter = e.RetryAfter
	case r.message != nil:
		a.Body.Error.Message = r.message(err)
	default:
		a.Body.Error.Message = err.Error()
		for _, k := range []error{ErrBadRequest, ErrUnauthorized, ErrForbidden, ErrMethodNotAllowed, ErrRequestTimeout, ErrConflict, ErrTooManyRequests} {
			a.Body.Error.Message = strings.TrimPrefix(a.Body.Error.Message, k.Error()+": ")
		}
	}
	a.Unexpected = !matched && e == nil
	if a.Status == http.StatusServiceUnavailable && a.RetryAfter <= 0 {
		a.RetryAfter = retryAfter(err)
	}
	var pending *ApprovalPendingError
	var parked *agent.RunError
	switch {
	case errors.As(err, &pending):
		a.Body.Error.RunID = pending.RunID
		for _, p := range pending.Approvals {
			a.Body.Error.Approvals = append(a.Body.Error.Approvals, PendingApproval{ID: p.ID, RunID: p.RunID, ToolName: p.ToolName, Arguments: p.Arguments, Reason: p.Reason})
		}
	case a.Body.Error.Code == "run_parked" && errors.As(err, &parked):
		a.Body.Error.RunID = parked.RunID
	}
	return a
}

// retryAfter is how long a client should wait before it tries again after
// the outage err: what the error says (a RetryAfter() time.Duration
// method in its chain), or DefaultRetryAfter.
func retryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		return ra.RetryAfter()
	}
	return DefaultRetryAfter
}

// approvalMessage says which approval requests the run of the
// *ApprovalPendingError err waits for, and how to answer them.
func approvalMessage(err error) string {
	var e *ApprovalPendingError
	errors.As(err, &e)
	if len(e.Approvals) == 0 {
		return err.Error()
	}
	var ids []string
	for _, a := range e.Approvals {
		ids = append(ids, fmt.Sprintf("%s (%s %s)", a.ID, a.ToolName, a.Arguments))
	}
	first := e.Approvals[0].ID
	return fmt.Sprintf("run %s waits for approval: %s. Answer over the WebSocket bridge (GET /v1/ws, {\"type\":\"approve\",\"approval\":%q,\"approve\":true}) or with calf approvals approve %s (or deny); the run then goes on, its answer in GET /v1/runs/%s/events",
		e.RunID, strings.Join(ids, ", "), first, first, e.RunID)
}

// Write answers err on w by the table, and returns the answer (for its
// caller to log an unexpected failure).
func Write(w http.ResponseWriter, err error) Answer {
	a := Of(err)
	a.Write(w)
	return a
}

// Write writes the answer on w: its headers (Retry-After, and
// WWW-Authenticate for a 401 that has none), its status and its body.
func (a Answer) Write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if a.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((a.RetryAfter+time.Second-1)/time.Second), 10))
	}
	if a.Status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Bearer realm="calf"`)
	}
	w.WriteHeader(a.Status)
	_ = json.NewEncoder(w).Encode(a.Body)
}
