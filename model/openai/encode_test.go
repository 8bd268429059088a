package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// sameJSON fails unless w encodes, by hand, to the JSON value json.Marshal
// makes of it, or both fail.
func sameJSON(t *testing.T, w *wireRequest) {
	t.Helper()
	want, werr := json.Marshal(w)
	got, gerr := w.appendJSON(nil)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("json.Marshal error %v, appendJSON error %v", werr, gerr)
	}
	if werr != nil {
		return
	}
	if !json.Valid(got) {
		t.Fatalf("appendJSON wrote invalid JSON: %s", got)
	}
	var a, b any
	if err := json.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("appendJSON:\n%s\njson.Marshal:\n%s", got, want)
	}
	// Key order and the rest of the bytes too, but for the escaping of
	// <, > and &, which json.Marshal does and appendJSON does not.
	var compact bytes.Buffer
	if err := json.Compact(&compact, got); err != nil {
		t.Fatal(err)
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, compact.Bytes())
	if !bytes.Equal(escaped.Bytes(), want) {
		t.Fatalf("bytes differ:\nappendJSON:   %s\njson.Marshal: %s", escaped.Bytes(), want)
	}
}

func TestEncodeAsMarshal(t *testing.T) {
	temp, zero, yes, no, idx := 0.3, 0.0, true, false, 2
	schema := json.RawMessage("{\"type\": \"object\",\n \"properties\": {\"a\": {\"type\": \"integer\"}}}")
	for _, w := range []*wireRequest{
		{},
		{Model: "m", Messages: []wireMessage{}},
		{Model: "gpt-4o-mini", Messages: []wireMessage{
			{Role: "system", Content: "Use the add tool."},
			{Role: "user", Content: "add 2 and 3 \"quoted\" \\ <b>&</b> \n\t\r\x00\x1f é 日本 \u2028\u2029 \xff\xfe end"},
			{Role: "assistant", ToolCalls: []wireToolCall{
				{ID: "call_1", Type: "function", Function: wireFunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}},
				{Index: &idx, Function: wireFunctionCall{Arguments: ""}},
			}, ReasoningContent: "Add them."},
			{Role: "tool", Content: "5", ToolCallID: "call_1"},
			{Role: "assistant", Content: ""},
			{Role: "user", Content: []wirePart{{Type: "text", Text: "look"}, {Type: "image_url", ImageURL: &wireImageURL{URL: "data:image/png;base64,AAAA"}}, {Type: "text"}}},
			{Role: "user", Content: []wirePart(nil)},
			{Role: "user", Content: map[string]int{"other": 1}},
		},
			Tools: []wireTool{
				{Type: "function", Function: wireFunction{Name: "add", Description: "Add two integers.", Parameters: schema}},
				{Type: "function", Function: wireFunction{Name: "none"}},
			},
			ToolChoice: json.RawMessage(` {"type": "function", "function": {"name": "add"}} `), ParallelToolCalls: &no,
			ResponseFormat: &wireResponseFormat{Type: "json_schema", JSONSchema: &wireJSONSchema{Name: "out", Schema: schema, Strict: true}},
			Temperature:    &temp, MaxTokens: 100, MaxCompletionTokens: 200, ReasoningEffort: "low",
			Stream: true, StreamOptions: &wireStreamOptions{IncludeUsage: true},
		},
		{Model: "m", Messages: []wireMessage{{Role: "user"}}, ParallelToolCalls: &yes, Temperature: &zero,
			ResponseFormat: &wireResponseFormat{Type: "json_object"}, StreamOptions: &wireStreamOptions{}},
		{Model: "m", ResponseFormat: &wireResponseFormat{Type: "json_schema", JSONSchema: &wireJSONSchema{Name: "n"}}},
		// Errors, both ways.
		{Model: "m", Tools: []wireTool{{Type: "function", Function: wireFunction{Name: "bad", Parameters: json.RawMessage(`{"type":`)}}}},
	} {
		sameJSON(t, w)
	}
	for _, f := range []float64{1e21, 1e-7, 123456789.125, -0.5, 2} {
		sameJSON(t, &wireRequest{Model: "m", Temperature: &f})
	}
	// Long schemas, whose compacted form is kept: the same the second
	// time, and one that is not JSON refused each time.
	long := json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer", "description": "the first operand"}}}`)
	bad := json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer", "description": "the first operand"}}`)
	for range 2 {
		sameJSON(t, &wireRequest{Model: "m", Tools: []wireTool{{Type: "function", Function: wireFunction{Name: "t", Parameters: long}}}})
		if _, err := (&wireRequest{Tools: []wireTool{{Function: wireFunction{Parameters: bad}}}}).appendJSON(nil); err == nil {
			t.Error("a schema that is not JSON encoded")
		}
	}
	nan := math.NaN()
	if _, err := (&wireRequest{Temperature: &nan}).appendJSON(nil); err == nil {
		t.Error("a NaN temperature encoded")
	}
}

func FuzzEncodeAsMarshal(f *testing.F) {
	f.Add("add 2 and 3", "call_1", `{"a":2}`, 0.5)
	f.Add("\xff\u2028<>&\"\\\x01", "", "", 1e300)
	f.Fuzz(func(t *testing.T, text, id, args string, temp float64) {
		if math.IsNaN(temp) || math.IsInf(temp, 0) {
			return
		}
		sameJSON(t, &wireRequest{Model: text, Temperature: &temp, Messages: []wireMessage{
			{Role: "user", Content: text},
			{Role: "assistant", ToolCalls: []wireToolCall{{ID: id, Type: "function", Function: wireFunctionCall{Name: text, Arguments: args}}}},
			{Role: "tool", Content: []wirePart{{Type: "text", Text: text}}, ToolCallID: id},
		}})
	})
}
