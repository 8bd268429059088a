package httperr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// slowOutage is an outage that says how long it lasts.
type slowOutage struct{}

func (slowOutage) Error() string             { return "failing over" }
func (slowOutage) RetryAfter() time.Duration { return 4500 * time.Millisecond }
func (slowOutage) Is(target error) bool      { return target == calf.ErrUnavailable }

func TestOf(t *testing.T) {
	parked := &agent.RunError{RunRef: agent.RunRef{Kind: "agent", Name: "a", RunID: "r1"}, Status: agent.RunRunning,
		Reason: "message m1 was parked; replaying dead letter d1 continues the run", Parked: &calf.DeadLetter{}}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter time.Duration
		message    string // a part of the message
	}{
		{"body too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, "request_too_large", 0, "over 10 bytes"},
		{"message too large", &calf.SizeError{Channel: "c", Size: 9, Limit: 8}, 413, "request_too_large", 0, "over the limit"},
		{"body timeout", fmt.Errorf("%w: the body did not arrive", httperr.ErrRequestTimeout), 408, "request_timeout", 0, "did not arrive"},
		{"no token", fmt.Errorf("%w: missing or wrong bearer token", httperr.ErrUnauthorized), 401, "invalid_api_key", 0, "missing or wrong"},
		{"forbidden", &httperr.Error{Kind: httperr.ErrForbidden, Code: "cross_origin", Message: "cross-origin request refused"}, 403, "cross_origin", 0, "cross-origin"},
		{"method", fmt.Errorf("%w: GET only", httperr.ErrMethodNotAllowed), 405, "method_not_allowed", 0, "GET only"},
		{"rate", &httperr.Error{Kind: httperr.ErrTooManyRequests, Message: "slow down", RetryAfter: time.Second}, 429, "rate_limit_exceeded", time.Second, "slow down"},
		{"bad request", fmt.Errorf("%w: no messages", httperr.ErrBadRequest), 400, "invalid_request", 0, "no messages"},
		{"thread", runner.ErrThread, 400, "invalid_request", 0, "only an agent"},
		{"invalid key", fmt.Errorf("get: %w", store.ErrInvalidKey), 400, "invalid_request", 0, "invalid key"},
		{"tool arguments", &tool.ArgumentError{Tool: "t", Err: errors.New("x is required")}, 400, "invalid_request", 0, "x is required"},
		{"outage", calf.Unavailable(errors.New("postgres: connection lost")), 503, "unavailable", httperr.DefaultRetryAfter, "connection lost"},
		{"refused", fmt.Errorf("store get: %w", refused), 503, "unavailable", httperr.DefaultRetryAfter, "connection refused"},
		{"outage says how long", fmt.Errorf("get: %w", slowOutage{}), 503, "unavailable", 4500 * time.Millisecond, "failing over"},
		{"outage of a not found", calf.Unavailable(fmt.Errorf("%w (stale)", store.ErrNotFound)), 503, "unavailable", httperr.DefaultRetryAfter, ""},
		{"approval pending", &httperr.ApprovalPendingError{RunID: "r1", Approvals: []approval.Approval{{ID: "a1", RunID: "r1", ToolName: "bash", Arguments: json.RawMessage(`{}`)}}}, 409, "approval_pending", 0, "calf approvals approve a1"},
		{"parked", fmt.Errorf("wait: %w", parked), 409, "run_parked", 0, "replay the dead letter"},
		{"store not found", fmt.Errorf("load: %w", store.ErrNotFound), 404, "not_found", 0, "not found"},
		{"approval not found", fmt.Errorf("%w: a1", approval.ErrNotFound), 404, "not_found", 0, "no such approval request"},
		{"dead letter not found", fmt.Errorf("%w: d1", deadletter.ErrNotFound), 404, "not_found", 0, "no such dead letter"},
		{"conversation not found", fmt.Errorf("%w: c1", conversation.ErrNotFound), 404, "not_found", 0, "conversation: not found"},
		{"not found with a code", &httperr.Error{Kind: store.ErrNotFound, Code: "model_not_found", Message: "no model"}, 404, "model_not_found", 0, "no model"},
		{"version conflict", fmt.Errorf("put: %w", store.ErrConflict), 409, "conflict", 0, "version conflict"},
		{"run ended", fmt.Errorf("%w with status completed", agent.ErrRunEnded), 409, "conflict", 0, "has ended"},
		{"approval answered", approval.ErrAnswered, 409, "conflict", 0, "answered already"},
		{"approval's run ended", approval.ErrRunEnded, 409, "conflict", 0, "has ended"},
		{"edge conflict", &httperr.Error{Kind: httperr.ErrConflict, Code: "conversation_stopped", Message: "stopped"}, 409, "conversation_stopped", 0, "stopped"},
		{"other", errors.New("boom"), 500, "internal", 0, "the server failed: boom"},
		{"failed run", &httperr.Error{Type: "server_error", Code: "run_failed", Message: "run r1 failed"}, 500, "run_failed", 0, "run r1 failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := httperr.Of(tt.err)
			if a.Status != tt.status || a.Body.Error.Code != tt.code || a.RetryAfter != tt.retryAfter || !strings.Contains(a.Body.Error.Message, tt.message) {
				t.Errorf("Of(%v) = %d %q retry after %v %q; want %d %q retry after %v, a message with %q",
					tt.err, a.Status, a.Body.Error.Code, a.RetryAfter, a.Body.Error.Message, tt.status, tt.code, tt.retryAfter, tt.message)
			}
			if strings.HasPrefix(a.Body.Error.Message, "bad request:") {
				t.Errorf("the message %q keeps its kind's prefix", a.Body.Error.Message)
			}
			if want := tt.code == "internal"; a.Unexpected != want {
				t.Errorf("Unexpected = %t, want %t", a.Unexpected, want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		header map[string]string
	}{
		{"outage", calf.Unavailable(errors.New("down")), map[string]string{"Retry-After": "2"}},
		{"outage rounds up", slowOutage{}, map[string]string{"Retry-After": "5"}},
		{"no token", httperr.ErrUnauthorized, map[string]string{"WWW-Authenticate": `Bearer realm="calf"`}},
		{"not found", store.ErrNotFound, map[string]string{"Retry-After": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			a := httperr.Write(rec, tt.err)
			if rec.Code != a.Status {
				t.Errorf("status %d, want %d", rec.Code, a.Status)
			}
			for k, v := range tt.header {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    string  `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != a.Body.Error.Code || body.Error.Message == "" || body.Error.Type == "" {
				t.Errorf("body %s (%v): want the error object of %+v", rec.Body, err, a.Body)
			}
		})
	}
}
