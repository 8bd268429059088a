package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// ErrMalformedStream is matched by the error of a stream with an event
// the adapter cannot read: data that is not JSON, or a content block out
// of order.
var ErrMalformedStream = errors.New("anthropic: malformed event stream")

// GenerateStream sends req as a streamed Messages request. It yields
// text, thinking and tool-call deltas as they arrive and the complete
// response last, the same one [Model.Generate] returns, and closes the
// stream when the consumer stops early or ctx is done.
//
// Errors are those of [Model.Generate], and: an error event in the
// stream, a *[model.StatusError] (see the package documentation); a
// stream that ends before its message_stop event, an error matching
// [io.ErrUnexpectedEOF]; an event that cannot be read, an error matching
// [ErrMalformedStream]. Nothing is retried once the stream has begun.
func (m *Model) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		body, err := m.body(req, true)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		resp, err := m.client.Do(ctx, &transport.Request{URL: m.url, Header: m.header, Body: body})
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		defer resp.Close()
		events := transport.NewSSEReader(resp.Body)
		acc := accumulator{requestID: requestID(resp.Header)}
		for {
			ev, err := events.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = m.unfinished(resp.Header.Get("Content-Type"))
				} else {
					err = m.readError(ctx, err)
				}
				yield(model.Chunk{}, err)
				return
			}
			delta, done, err := acc.add(ev)
			if err != nil {
				yield(model.Chunk{}, fmt.Errorf("anthropic: %s: %w", m.model, err))
				return
			}
			if delta != nil && !yield(model.Chunk{Delta: delta}, nil) {
				return
			}
			if done {
				r, err := acc.response()
				if err != nil {
					yield(model.Chunk{}, err)
					return
				}
				yield(model.Chunk{Response: r}, nil)
				return
			}
		}
	}
}

// unfinished is the error of a stream that ended before message_stop.
func (m *Model) unfinished(contentType string) error {
	if t, _, _ := mime.ParseMediaType(contentType); t != "" && t != "text/event-stream" {
		return fmt.Errorf("anthropic: %s: %w: the answer (content type %q) is not an event stream", m.model, io.ErrUnexpectedEOF, contentType)
	}
	return fmt.Errorf("anthropic: %s: %w: the stream ended before message_stop", m.model, io.ErrUnexpectedEOF)
}

// accumulator builds a streamed message from its events.
type accumulator struct {
	requestID string
	msg       wireResponse
	// input holds the JSON text streamed for each block, by index.
	input []string
	// call is the index among the message's tool calls of each block
	// that is one, by index; -1 for other blocks.
	call  []int
	calls int
}

// add adds an event. It returns the delta to yield for it, if any, and
// whether the message is complete (message_stop).
func (a *accumulator) add(ev transport.Event) (*model.Delta, bool, error) {
	var e wireEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		return nil, false, fmt.Errorf("%w: event %q: %w", ErrMalformedStream, ev.Event, err)
	}
	if e.Type == "" {
		e.Type = ev.Event
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return nil, false, fmt.Errorf("%w: message_start without a message", ErrMalformedStream)
		}
		a.msg = *e.Message
		a.msg.Content = nil
	case "content_block_start":
		if e.ContentBlock == nil || e.Index != len(a.msg.Content) {
			return nil, false, fmt.Errorf("%w: content block %d started out of order", ErrMalformedStream, e.Index)
		}
		b := *e.ContentBlock
		a.msg.Content = append(a.msg.Content, b)
		a.input = append(a.input, "")
		a.call = append(a.call, -1)
		switch b.Type {
		case "tool_use":
			a.call[e.Index] = a.calls
			a.calls++
			return &model.Delta{ToolCall: &model.ToolCallDelta{Index: a.call[e.Index], ID: b.ID, Name: b.Name}}, false, nil
		case "text":
			if b.Text != "" {
				return &model.Delta{Text: b.Text}, false, nil
			}
		case "thinking":
			if b.Thinking != "" {
				return &model.Delta{Thinking: b.Thinking}, false, nil
			}
		}
	case "content_block_delta":
		if e.Index < 0 || e.Index >= len(a.msg.Content) || e.Delta == nil {
			return nil, false, fmt.Errorf("%w: delta of content block %d, which has not started", ErrMalformedStream, e.Index)
		}
		return a.delta(e.Index, e.Delta)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			a.msg.StopReason = e.Delta.StopReason
		}
		if u := e.Usage; u != nil {
			set(&a.msg.Usage.InputTokens, u.InputTokens)
			set(&a.msg.Usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			set(&a.msg.Usage.CacheReadInputTokens, u.CacheReadInputTokens)
			set(&a.msg.Usage.OutputTokens, u.OutputTokens)
		}
	case "message_stop":
		return nil, true, nil
	case "error":
		return nil, false, a.streamError([]byte(ev.Data))
	}
	// ping, content_block_stop, and event types the API may add.
	return nil, false, nil
}

// delta adds the delta d of content block i.
func (a *accumulator) delta(i int, d *wireDelta) (*model.Delta, bool, error) {
	b := &a.msg.Content[i]
	want := map[string]string{
		"text_delta":       "text",
		"input_json_delta": "tool_use",
		"thinking_delta":   "thinking",
		"signature_delta":  "thinking",
	}[d.Type]
	if want != "" && b.Type != want {
		return nil, false, fmt.Errorf("%w: %s in a %s block", ErrMalformedStream, d.Type, b.Type)
	}
	switch d.Type {
	case "text_delta":
		b.Text += d.Text
		if d.Text != "" {
			return &model.Delta{Text: d.Text}, false, nil
		}
	case "input_json_delta":
		a.input[i] += d.PartialJSON
		if d.PartialJSON != "" {
			return &model.Delta{ToolCall: &model.ToolCallDelta{Index: a.call[i], Arguments: d.PartialJSON}}, false, nil
		}
	case "thinking_delta":
		b.Thinking += d.Thinking
		if d.Thinking != "" {
			return &model.Delta{Thinking: d.Thinking}, false, nil
		}
	case "signature_delta":
		b.Signature += d.Signature
	}
	// citations_delta, and delta types the API may add.
	return nil, false, nil
}

func set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// response returns the complete message. A tool call's arguments are the
// JSON text streamed for it, exactly; one without any has the input its
// block started with.
func (a *accumulator) response() (*model.Response, error) {
	for i := range a.msg.Content {
		if b := &a.msg.Content[i]; b.Type == "tool_use" && a.input[i] != "" {
			b.Input = json.RawMessage(a.input[i])
		}
	}
	return response(&a.msg)
}

// streamError converts an error event, {"type": "error", "error": {"type":
// "overloaded_error", "message": ...}}. It has no HTTP status of its own
// (the stream's was 200): its StatusCode is the one the API gives an
// error of its type, so that [model.StatusError.Retryable] and errors.Is
// answer as for the same error before the stream.
func (a *accumulator) streamError(data []byte) error {
	e := &model.StatusError{Provider: provider, RequestID: a.requestID}
	if !transport.DecodeError(data, e) || e.Message == "" {
		e.Message = "error event: " + truncate(string(data))
	}
	e.StatusCode = errorStatus[e.Type]
	if e.StatusCode == 0 {
		e.StatusCode = 500
	}
	return e
}

// errorStatus is the HTTP status of each of the API's error types.
var errorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}
