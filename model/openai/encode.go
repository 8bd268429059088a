package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The body of a chat completion request is written by hand rather than by
// encoding/json: it is on the path of every model call, and reflection,
// boxing and the validation of each raw value cost a W1 run more CPU and
// allocations than the rest of the adapter. It writes what json.Marshal
// writes for a wireRequest, up to the escaping of <, > and &, which both
// leave as valid JSON strings (TestEncodeAsMarshal compares the two).

// errNotFinite is the error of a temperature that JSON cannot hold.
var errNotFinite = errors.New("json: unsupported value: a temperature that is NaN or infinite")

// sizeHint is about the size of w's encoding, a little more when nothing
// needs escaping, so that the body is written into one allocation.
func (w *wireRequest) sizeHint() int {
	n := 128 + len(w.Model) + len(w.ToolChoice)
	for i := range w.Messages {
		m := &w.Messages[i]
		n += 40 + len(m.ToolCallID) + len(m.ReasoningContent)
		switch c := m.Content.(type) {
		case string:
			n += len(c)
		case []wirePart:
			for _, p := range c {
				n += 48 + len(p.Text)
				if p.ImageURL != nil {
					n += len(p.ImageURL.URL)
				}
			}
		}
		for _, c := range m.ToolCalls {
			n += 64 + len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	for _, t := range w.Tools {
		n += 64 + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	if f := w.ResponseFormat; f != nil && f.JSONSchema != nil {
		n += 64 + len(f.JSONSchema.Name) + len(f.JSONSchema.Schema)
	}
	return n
}

// appendJSON appends the JSON encoding of w to b.
func (w *wireRequest) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = appendString(b, w.Model)
	b = append(b, `,"messages":`...)
	if w.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range w.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = w.Messages[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if len(w.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range w.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, t.Type)
			b = append(b, `,"function":{"name":`...)
			b = appendString(b, t.Function.Name)
			if t.Function.Description != "" {
				b = append(b, `,"description":`...)
				b = appendString(b, t.Function.Description)
			}
			b = append(b, `,"parameters":`...)
			var err error
			if b, err = appendRaw(b, t.Function.Parameters); err != nil {
				return nil, err
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if len(w.ToolChoice) > 0 {
		b = append(b, `,"tool_choice":`...)
		var err error
		if b, err = appendRaw(b, w.ToolChoice); err != nil {
			return nil, err
		}
	}
	if w.ParallelToolCalls != nil {
		b = append(b, `,"parallel_tool_calls":`...)
		b = strconv.AppendBool(b, *w.ParallelToolCalls)
	}
	if f := w.ResponseFormat; f != nil {
		b = append(b, `,"response_format":{"type":`...)
		b = appendString(b, f.Type)
		if s := f.JSONSchema; s != nil {
			b = append(b, `,"json_schema":{"name":`...)
			b = appendString(b, s.Name)
			if len(s.Schema) > 0 {
				b = append(b, `,"schema":`...)
				var err error
				if b, err = appendRaw(b, s.Schema); err != nil {
					return nil, err
				}
			}
			if s.Strict {
				b = append(b, `,"strict":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if t := w.Temperature; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) {
			return nil, errNotFinite
		}
		b = append(b, `,"temperature":`...)
		b = appendFloat(b, *t)
	}
	if w.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(w.MaxTokens), 10)
	}
	if w.MaxCompletionTokens != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(w.MaxCompletionTokens), 10)
	}
	if w.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = appendString(b, w.ReasoningEffort)
	}
	if w.Stream {
		b = append(b, `,"stream":true`...)
	}
	if o := w.StreamOptions; o != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, o.IncludeUsage)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendJSON appends the JSON encoding of m to b.
func (m *wireMessage) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = appendString(b, m.Role)
	switch c := m.Content.(type) {
	case nil:
	case string:
		b = append(b, `,"content":`...)
		b = appendString(b, c)
	case []wirePart:
		b = append(b, `,"content":`...)
		if c == nil {
			b = append(b, "null"...)
			break
		}
		b = append(b, '[')
		for i, p := range c {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, p.Type)
			if p.Text != "" {
				b = append(b, `,"text":`...)
				b = appendString(b, p.Text)
			}
			if p.ImageURL != nil {
				b = append(b, `,"image_url":{"url":`...)
				b = appendString(b, p.ImageURL.URL)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	default:
		// Not made by this package; encoding/json says what it makes of it.
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"content":`...)
		b = append(b, raw...)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			sep := false
			if c.Index != nil {
				b = append(b, `"index":`...)
				b = strconv.AppendInt(b, int64(*c.Index), 10)
				sep = true
			}
			if c.ID != "" {
				if sep {
					b = append(b, ',')
				}
				b = append(b, `"id":`...)
				b = appendString(b, c.ID)
				sep = true
			}
			if c.Type != "" {
				if sep {
					b = append(b, ',')
				}
				b = append(b, `"type":`...)
				b = appendString(b, c.Type)
				sep = true
			}
			if sep {
				b = append(b, ',')
			}
			b = append(b, `"function":{`...)
			if c.Function.Name != "" {
				b = append(b, `"name":`...)
				b = appendString(b, c.Function.Name)
				b = append(b, ',')
			}
			b = append(b, `"arguments":`...)
			b = appendString(b, c.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.ToolCallID)
	}
	if m.ReasoningContent != "" {
		b = append(b, `,"reasoning_content":`...)
		b = appendString(b, m.ReasoningContent)
	}
	return append(b, '}'), nil
}

// appendRaw appends a raw JSON value, compacted, as encoding/json does; a
// nil value is null, and one that is not valid JSON an error.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	if len(raw) < minCompactCached {
		return appendCompact(b, raw)
	}
	compacted.RLock()
	c, ok := compacted.m[string(raw)]
	compacted.RUnlock()
	if ok {
		return append(b, c...), nil
	}
	c, err := appendCompact(nil, raw)
	if err != nil {
		return nil, err
	}
	compacted.Lock()
	if len(compacted.m) < maxCompactCached {
		compacted.m[string(raw)] = c
	}
	compacted.Unlock()
	return append(b, c...), nil
}

// Tool schemas go out with every request of a conversation, the same each
// time: their compacted form is kept (up to maxCompactCached of them, each
// of minCompactCached bytes or more) rather than made again.
const (
	minCompactCached = 64
	maxCompactCached = 1024
)

var compacted = struct {
	sync.RWMutex
	m map[string][]byte // a raw value: its compacted form
}{m: map[string][]byte{}}

// appendCompact appends raw compacted, or fails when it is not valid JSON.
func appendCompact(b []byte, raw json.RawMessage) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, and U+2028 and
// U+2029 escaped, as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += n
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat appends a finite f as encoding/json writes it: as a decimal,
// or in exponent form below 1e-6 and from 1e21 on, with an exponent of at
// least one digit ("1e-7", not "1e-07").
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
