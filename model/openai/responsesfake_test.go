package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// No recording covers the Responses API (shared/recordings has chat
// completions only). The fake below answers as OpenAI documents the API:
// a response object, or, for "stream": true, its typed server-sent events
// (response.created, response.output_item.added, the deltas of reasoning
// summaries, output text and function call arguments, their .done events,
// response.output_item.done and response.completed or
// response.incomplete), each with its sequence_number.

// item is an output item of a response, as JSON.
type item = map[string]any

func reasoningItem(id, encrypted string, summary ...string) item {
	parts := []any{}
	for _, s := range summary {
		parts = append(parts, map[string]any{"type": "summary_text", "text": s})
	}
	return item{"id": id, "type": "reasoning", "summary": parts, "encrypted_content": encrypted}
}

func messageItem(id, text string) item {
	return item{"id": id, "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}}}
}

func callItem(id, callID, name, args string) item {
	return item{"id": id, "type": "function_call", "status": "completed", "call_id": callID, "name": name, "arguments": args}
}

// usageOf returns a usage object.
func usageOf(in, cached, out, reasoning int) map[string]any {
	return map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": cached},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": reasoning},
		"total_tokens": in + out,
	}
}

// responseObject returns a response object with status "completed".
func responseObject(id, model string, usage map[string]any, output ...item) map[string]any {
	if output == nil {
		output = []item{}
	}
	return map[string]any{
		"id": id, "object": "response", "created_at": 1756000000, "status": "completed",
		"error": nil, "incomplete_details": nil, "model": model, "output": output,
		"parallel_tool_calls": true, "store": false, "usage": usage,
	}
}

// respFake is a fake Responses API that answers the requests it gets with
// its turns, in order, and keeps their bodies.
type respFake struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	turns []map[string]any
	// answer, when set, decides each answer from the request instead.
	answer func(body map[string]any) map[string]any
	// dropFinalOutput leaves the output out of the stream's last event.
	dropFinalOutput bool
	bodies          []map[string]any
	headers         []http.Header
	paths           []string
}

func newRespFake(t *testing.T, turns ...map[string]any) *respFake {
	f := &respFake{t: t, turns: turns}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the fake's base URL, ending in /v1.
func (f *respFake) URL() string { return f.srv.URL + "/v1" }

func (f *respFake) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		f.t.Errorf("request body %s: %v", raw, err)
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.URL.RequestURI())
	var resp map[string]any
	switch {
	case f.answer != nil:
		resp = f.answer(body)
	case n < len(f.turns):
		resp = f.turns[n]
	}
	drop := f.dropFinalOutput
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.Error(w, `{"error":{"message":"no such route","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if resp == nil {
		f.t.Errorf("request %d: the fake has no answer", n+1)
		http.Error(w, "no answer", http.StatusInternalServerError)
		return
	}
	if stream, _ := body["stream"].(bool); stream {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write(streamEvents(resp, drop))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// body returns the body of request i (from 0).
func (f *respFake) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// requests returns the number of requests received.
func (f *respFake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// pieces splits s in two, so that deltas come in more than one event.
func pieces(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// streamEvents returns the events of a streamed response that ends as
// resp: what OpenAI sends for it. dropFinal leaves the output out of the
// last event, as some compatible servers do.
func streamEvents(resp map[string]any, dropFinal bool) []byte {
	var buf bytes.Buffer
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		data, _ := json.Marshal(fields)
		fmt.Fprintf(&buf, "event: %s\ndata: %s\n\n", typ, data)
	}
	started := map[string]any{}
	for k, v := range resp {
		started[k] = v
	}
	started["status"], started["output"], started["usage"] = "in_progress", []any{}, nil
	emit("response.created", map[string]any{"response": started})
	emit("response.in_progress", map[string]any{"response": started})
	output, _ := resp["output"].([]item)
	for i, it := range output {
		id := it["id"]
		switch it["type"] {
		case "reasoning":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": item{"id": id, "type": "reasoning", "summary": []any{}}})
			summary, _ := it["summary"].([]any)
			for j, s := range summary {
				text := s.(map[string]any)["text"].(string)
				emit("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i, "summary_index": j,
					"part": map[string]any{"type": "summary_text", "text": ""}})
				for _, p := range pieces(text) {
					emit("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": i, "summary_index": j, "delta": p})
				}
				emit("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i, "summary_index": j, "text": text})
				emit("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i, "summary_index": j,
					"part": map[string]any{"type": "summary_text", "text": text}})
			}
		case "message":
			emit("response.output_item.added", map[string]any{"output_index": i,
				"item": item{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			content, _ := it["content"].([]any)
			for j, c := range content {
				text := c.(map[string]any)["text"].(string)
				emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": j,
					"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
				for _, p := range strings.SplitAfter(text, " ") {
					emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": j, "delta": p, "logprobs": []any{}})
				}
				emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": j, "text": text, "logprobs": []any{}})
				emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": j,
					"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
			}
		case "function_call":
			emit("response.output_item.added", map[string]any{"output_index": i,
				"item": item{"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": it["call_id"], "name": it["name"]}})
			args := it["arguments"].(string)
			for _, p := range pieces(args) {
				emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": p})
			}
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	if dropFinal {
		final := map[string]any{}
		for k, v := range resp {
			final[k] = v
		}
		final["output"] = []any{}
		resp = final
	}
	switch resp["status"] {
	case "incomplete":
		emit("response.incomplete", map[string]any{"response": resp})
	case "failed":
		emit("response.failed", map[string]any{"response": resp})
	default:
		emit("response.completed", map[string]any{"response": resp})
	}
	return buf.Bytes()
}
