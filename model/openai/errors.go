package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/calf-go/calf/model"
)

// wrapError converts an error of the SDK into Calf's: a cancelled ctx
// gives ctx's error; running out of time matches [model.ErrTimeout]; an
// HTTP error response becomes a *[model.StatusError]. raw is the last HTTP
// response, if any.
func (m *Model) wrapError(ctx context.Context, err error, raw *http.Response) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return fmt.Errorf("openai: %s: %w: %w", m.model, model.ErrTimeout, ctxErr)
		}
		return fmt.Errorf("openai: %s: %w", m.model, ctxErr)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return m.statusError(apiErr.StatusCode, apiMessage(apiErr))
	}
	if raw != nil && raw.StatusCode >= 400 {
		// The SDK could not read the error body as an OpenAI error object.
		return m.statusError(raw.StatusCode, bodyMessage(raw))
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return fmt.Errorf("openai: %s: %w: %w", m.model, model.ErrTimeout, err)
	}
	return fmt.Errorf("openai: %s: %w", m.model, err)
}

// statusError is the error of an HTTP error response. A 404 or 405 from a
// base URL whose path does not end in /v1 asks whether /v1 is missing: the
// server has no such route, which is what a server that serves the API
// under /v1 answers then.
func (m *Model) statusError(code int, msg string) *model.StatusError {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) && m.unversioned != "" {
		msg += fmt.Sprintf(" (is the base URL %s missing /v1?)", m.unversioned)
	}
	return &model.StatusError{Provider: "openai", StatusCode: code, Message: msg}
}

// apiMessage returns the message of an API error, or what the server sent
// instead when it sent no OpenAI error object.
func apiMessage(e *sdk.Error) string {
	if e.Message != "" {
		return e.Message
	}
	if e.Response != nil {
		return bodyMessage(e.Response)
	}
	return http.StatusText(e.StatusCode)
}

// maxErrorBody bounds the part of an error body quoted in an error.
const maxErrorBody = 512

// bodyMessage returns the message of an error body that is not an OpenAI
// error object: {"error": "..."} as some servers send, or the text itself.
func bodyMessage(resp *http.Response) string {
	if resp.Body == nil {
		return http.StatusText(resp.StatusCode)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var v struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		if s, ok := v.Error.(string); ok && s != "" {
			return s
		}
		if v.Message != "" {
			return v.Message
		}
	}
	s := strings.TrimSpace(string(bytes.ToValidUTF8(b, nil)))
	if s == "" {
		return http.StatusText(resp.StatusCode)
	}
	if len(s) > maxErrorBody {
		s = s[:maxErrorBody] + "..."
	}
	return s
}
