package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/model/anthropic"
)

// fakeAPI is a stand-in for the Messages API: it answers the n-th request
// (from 0) with answer, and keeps the requests' bodies and headers.
type fakeAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	paths   []string
}

// answerFunc writes the answer to the n-th request, whose body is body.
type answerFunc func(n int, body []byte, w http.ResponseWriter)

func newFake(t testing.TB, answer answerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.bodies)
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		f.paths = append(f.paths, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		answer(n, body, w)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// model returns a model of the fake, without retries unless opts asks.
func (f *fakeAPI) model(t testing.TB, opts anthropic.Options) *anthropic.Model {
	t.Helper()
	opts.BaseURL = f.srv.URL
	if opts.APIKey == "" {
		opts.APIKey = "test-key"
	}
	if opts.Model == "" {
		opts.Model = "claude-haiku-4-5"
	}
	m, err := anthropic.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fakeAPI) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// reply is a message of the API, which a fake sends whole or streamed.
type reply struct {
	ID     string
	Model  string
	Blocks []apiBlock
	Stop   string
	Usage  map[string]int64
}

// apiBlock is a content block as the API sends it, its members in the
// API's order.
type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
}

func textBlock(s string) apiBlock { return apiBlock{Type: "text", Text: s} }

func toolUse(id, name, input string) apiBlock {
	return apiBlock{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

func thinkingBlock(text, sig string) apiBlock {
	return apiBlock{Type: "thinking", Thinking: text, Signature: sig}
}

func redactedBlock(data string) apiBlock { return apiBlock{Type: "redacted_thinking", Data: data} }

func (r reply) message() map[string]any {
	return map[string]any{
		"model": r.Model, "id": r.ID, "type": "message", "role": "assistant",
		"content": r.Blocks, "stop_reason": r.Stop, "stop_sequence": nil, "usage": r.Usage,
	}
}

// json returns the message as the API answers a request that does not
// stream.
func (r reply) json() string { return mustJSON(r.message()) }

// sse returns the message as the API streams it: text, thinking and tool
// input in pieces, a ping, and trailing spaces in some data lines, as the
// API sends them.
func (r reply) sse() string {
	var b strings.Builder
	ev := func(typ string, data any) {
		fmt.Fprintf(&b, "event: %s\ndata: %s   \n\n", typ, mustJSON(data))
	}
	start := r.message()
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]int64{"input_tokens": r.Usage["input_tokens"],
		"cache_creation_input_tokens": r.Usage["cache_creation_input_tokens"],
		"cache_read_input_tokens":     r.Usage["cache_read_input_tokens"], "output_tokens": 1}
	ev("message_start", map[string]any{"type": "message_start", "message": start})
	for i, blk := range r.Blocks {
		delta := func(d map[string]any) {
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch blk.Type {
		case "text":
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			if i == 0 {
				ev("ping", map[string]any{"type": "ping"})
			}
			for _, p := range pieces(blk.Text) {
				delta(map[string]any{"type": "text_delta", "text": p})
			}
		case "thinking":
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, p := range pieces(blk.Thinking) {
				delta(map[string]any{"type": "thinking_delta", "thinking": p})
			}
			delta(map[string]any{"type": "signature_delta", "signature": blk.Signature})
		case "redacted_thinking":
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blk})
		case "tool_use":
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": blk.ID, "name": blk.Name, "input": map[string]any{}}})
			delta(map[string]any{"type": "input_json_delta", "partial_json": ""})
			in := string(blk.Input)
			if in != "{}" {
				h := len(in) / 2
				delta(map[string]any{"type": "input_json_delta", "partial_json": in[:h]})
				delta(map[string]any{"type": "input_json_delta", "partial_json": in[h:]})
			}
		default:
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blk})
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": r.Stop, "stop_sequence": nil}, "usage": r.Usage})
	ev("message_stop", map[string]any{"type": "message_stop"})
	return b.String()
}

// pieces splits s after each space.
func pieces(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			i = len(s) - 1
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// answerWith answers each request with the next reply, streamed when the
// request asks for a stream.
func answerWith(replies ...reply) answerFunc {
	return func(n int, body []byte, w http.ResponseWriter) {
		r := replies[min(n, len(replies)-1)]
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Request-Id", fmt.Sprintf("req_%d", n))
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			_, _ = io.WriteString(w, r.sse())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, r.json())
	}
}

// errorAnswer writes an error response of the API.
func errorAnswer(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_err")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}))
}
