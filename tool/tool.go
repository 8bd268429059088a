package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/calf-go/calf/model"
)

// Tool is a function a model can call.
type Tool interface {
	// Definition describes the tool to the model.
	Definition() model.ToolDefinition
	// Call runs the tool with the JSON arguments the model sent. Arguments
	// that do not decode or fail the schema yield an [*ArgumentError] and
	// the tool's function is not run.
	Call(ctx context.Context, args json.RawMessage) (*Result, error)
}

// Result is what a tool returns to the model.
type Result struct {
	// Parts is the content shown to the model: text and images.
	Parts []model.Part `json:"parts,omitempty"`
	// Structured is the result as JSON, for tools with a structured output.
	Structured json.RawMessage `json:"structured,omitempty"`
	// IsError marks a result that reports a failure to the model.
	IsError bool `json:"is_error,omitempty"`
	// Metadata is for the application, never shown to the model: it
	// travels with the result in the run's events and stays with the
	// run's record of the call (as FileResult's path, type and size do).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Clone returns a copy of r that shares no memory with it that either
// could change, or nil for nil.
func (r *Result) Clone() *Result {
	if r == nil {
		return nil
	}
	c := *r
	c.Parts = model.Message{Parts: r.Parts}.Clone().Parts
	c.Structured = bytes.Clone(r.Structured)
	c.Metadata = maps.Clone(r.Metadata)
	return &c
}

// Text returns the concatenated text parts of r.
func (r *Result) Text() string {
	return model.Message{Parts: r.Parts}.Text()
}

// String returns r's text (see [Result.Text]), or its structured value
// as JSON when it has no text, so that printing a result shows what the
// model sees. A nil result is the empty string.
func (r *Result) String() string {
	if r == nil {
		return ""
	}
	if t := r.Text(); t != "" || len(r.Structured) == 0 {
		return t
	}
	return string(r.Structured)
}

// TextResult returns a result with one text part.
func TextResult(s string) *Result { return &Result{Parts: []model.Part{model.TextPart(s)}} }

// ErrorResult returns an error result whose text is err's message.
func ErrorResult(err error) *Result {
	return &Result{Parts: []model.Part{model.TextPart(err.Error())}, IsError: true}
}

// ErrUnknownTool is returned when the model calls a tool the agent does not have.
var ErrUnknownTool = errors.New("tool: unknown tool")

// ArgumentError reports tool arguments that are malformed or fail the
// tool's schema. Its message is written for the model, which gets it back
// as the tool's result so that it can correct the call.
type ArgumentError struct {
	Tool string
	Err  error
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("invalid arguments for tool %q: %v", e.Tool, e.Err)
}

func (e *ArgumentError) Unwrap() error { return e.Err }
