package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// streamingModel is what both models of the package are.
type streamingModel interface {
	model.Model
	model.Streamer
}

// faultAPI is one of the package's APIs, with the bodies of its answers.
type faultAPI struct {
	name string
	path string
	// ok is the body of a successful answer; okStream that of a streamed
	// one.
	ok, okStream []byte
	okText       string
	newModel     func(opts openai.Options) (streamingModel, error)
}

// chatCompletionBody is a chat completion shaped like the recorded ones.
const chatCompletionBody = `{
  "id": "chatcmpl-fault", "object": "chat.completion", "created": 1755690953, "model": "gpt-4o-mini-2024-07-18",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "All good.", "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 13, "completion_tokens": 3, "total_tokens": 16,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
  "service_tier": "default", "system_fingerprint": null
}`

// chatChunk returns a chunk of a streamed chat completion, shaped like the
// recorded ones.
func chatChunk(delta, finish, usage string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = `"` + finish + `"`
	}
	choices := `[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]`
	if usage == "" {
		usage = "null"
	} else {
		choices = "[]"
	}
	return `data: {"id":"chatcmpl-fault","object":"chat.completion.chunk","created":1755691077,"model":"gpt-4o-mini-2024-07-18",` +
		`"service_tier":"default","system_fingerprint":null,"choices":` + choices + `,"usage":` + usage + `,"obfuscation":"x"}` + "\n\n"
}

var chatStreamBody = chatChunk(`{"role":"assistant","content":"","refusal":null}`, "", "") +
	chatChunk(`{"content":"All"}`, "", "") +
	chatChunk(`{"content":" good."}`, "", "") +
	chatChunk(`{}`, "stop", "") +
	chatChunk("", "", `{"prompt_tokens":13,"completion_tokens":3,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`) +
	"data: [DONE]\n\n"

func faultAPIs(t *testing.T) []faultAPI {
	resp := responseObject("resp_fault", "gpt-4o-mini", usageOf(13, 0, 3, 0), messageItem("msg_1", "All good."))
	okResp := asJSONBytes(t, resp)
	return []faultAPI{
		{
			name: "chat completions", path: "/v1/chat/completions",
			ok: []byte(chatCompletionBody), okStream: []byte(chatStreamBody), okText: "All good.",
			newModel: func(o openai.Options) (streamingModel, error) { return openai.New(o) },
		},
		{
			name: "responses", path: "/v1/responses",
			ok: okResp, okStream: streamEvents(resp, false), okText: "All good.",
			newModel: func(o openai.Options) (streamingModel, error) { return openai.NewResponses(o) },
		},
	}
}

func asJSONBytes(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// halfStream returns the first half of the events of a stream.
func halfStream(body []byte) []byte {
	events := bytes.SplitAfter(body, []byte("\n\n"))
	return bytes.Join(events[:len(events)/2], nil)
}

// faultServer answers request n (from 1) with answer(n).
func faultServer(t *testing.T, answer func(n int, w http.ResponseWriter)) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer(int(n.Add(1)), w)
	}))
	t.Cleanup(s.Close)
	return s.URL + "/v1", &n
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// OpenAI's error bodies.
const (
	contextTooLongBody = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	badKeyBody         = `{"error":{"message":"Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	rateLimitBody      = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
)

func TestFaults(t *testing.T) {
	for _, api := range faultAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			newModel := func(t *testing.T, base string, retries int) streamingModel {
				t.Helper()
				m, err := api.newModel(openai.Options{Model: "gpt-4o-mini", BaseURL: base, APIKey: "sk-test", MaxRetries: retries})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}

			t.Run("429 with Retry-After then success", func(t *testing.T) {
				base, n := faultServer(t, func(n int, w http.ResponseWriter) {
					if n == 1 {
						w.Header().Set("Retry-After", "1")
						writeBody(w, 429, "application/json", []byte(rateLimitBody))
						return
					}
					writeBody(w, 200, "application/json", api.ok)
				})
				resp, err := newModel(t, base, 2).Generate(t.Context(), req)
				if err != nil || resp.Message.Text() != api.okText || n.Load() != 2 {
					t.Fatalf("resp %v, err %v after %d requests; want the answer after 2", resp, err, n.Load())
				}
			})
			t.Run("429 past the retries", func(t *testing.T) {
				base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
					w.Header().Set("Retry-After", "7")
					w.Header().Set("X-Request-Id", "req_429")
					writeBody(w, 429, "application/json", []byte(rateLimitBody))
				})
				_, err := newModel(t, base, -1).Generate(t.Context(), req)
				var se *model.StatusError
				if !errors.As(err, &se) || !errors.Is(err, model.ErrRateLimited) {
					t.Fatalf("err = %v, want a StatusError matching ErrRateLimited", err)
				}
				if se.Code != "rate_limit_exceeded" || se.Type != "requests" || se.RequestID != "req_429" || se.RetryAfter.Seconds() != 7 {
					t.Errorf("error %+v", se)
				}
			})
			t.Run("500 twice then success", func(t *testing.T) {
				base, n := faultServer(t, func(n int, w http.ResponseWriter) {
					if n <= 2 {
						writeBody(w, 500, "application/json", []byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`))
						return
					}
					writeBody(w, 200, "text/event-stream", api.okStream)
				})
				_, resp, err := streamAll(t, newModel(t, base, 2), req)
				if err != nil || n.Load() != 3 {
					t.Fatalf("err %v after %d requests; want the answer after 3", err, n.Load())
				}
				if resp.Message.Text() != api.okText {
					t.Errorf("text %q", resp.Message.Text())
				}
			})
			t.Run("stream cut by the connection", func(t *testing.T) {
				base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(200)
					_, _ = w.Write(halfStream(api.okStream))
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler)
				})
				deltas, resp, err := streamAll(t, newModel(t, base, 2), req)
				if err == nil || resp != nil {
					t.Fatalf("response %v, err %v; want an error", resp, err)
				}
				if len(deltas) == 0 {
					t.Error("no delta came before the cut")
				}
			})
			t.Run("stream ended early", func(t *testing.T) {
				base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
					writeBody(w, 200, "text/event-stream", halfStream(api.okStream))
				})
				_, resp, err := streamAll(t, newModel(t, base, 2), req)
				if !errors.Is(err, io.ErrUnexpectedEOF) || resp != nil {
					t.Fatalf("response %v, err %v; want io.ErrUnexpectedEOF", resp, err)
				}
			})
			t.Run("malformed event", func(t *testing.T) {
				base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
					body := append(halfStream(api.okStream), "data: {\"type\":\"response.output_text.delta\",\"delta\":\n\n"...)
					writeBody(w, 200, "text/event-stream", append(body, api.okStream...))
				})
				_, resp, err := streamAll(t, newModel(t, base, 2), req)
				if err == nil || !strings.Contains(err.Error(), "malformed") || resp != nil {
					t.Fatalf("response %v, err %v; want a malformed-event error", resp, err)
				}
			})
			for _, tt := range []struct {
				name   string
				status int
				body   string
				is     []error
			}{
				{"400 context too long", 400, contextTooLongBody, []error{model.ErrContextTooLong, model.ErrInvalidRequest}},
				{"401", 401, badKeyBody, []error{model.ErrAuthentication}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					base, n := faultServer(t, func(n int, w http.ResponseWriter) {
						writeBody(w, tt.status, "application/json", []byte(tt.body))
					})
					m := newModel(t, base, 2)
					_, err := m.Generate(t.Context(), req)
					_, _, serr := streamAll(t, m, req)
					for _, err := range []error{err, serr} {
						var se *model.StatusError
						if !errors.As(err, &se) || se.StatusCode != tt.status || se.Provider != "openai" || se.Type != "invalid_request_error" {
							t.Fatalf("err = %v, want a StatusError %d", err, tt.status)
						}
						for _, target := range tt.is {
							if !errors.Is(err, target) {
								t.Errorf("%v does not match %v", err, target)
							}
						}
					}
					if n.Load() != 2 {
						t.Errorf("%d requests, want 2: a %d is not retried", n.Load(), tt.status)
					}
				})
			}
		})
	}
}

// TestChatStreamErrorChunk: an error object inside a chat completion
// stream (OpenRouter's, when the upstream provider fails) is a status
// error, not the end of a short answer.
func TestChatStreamErrorChunk(t *testing.T) {
	base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
		body := chatChunk(`{"content":"Par"}`, "", "") +
			`data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","provider":"Venice",` +
			`"error":{"code":502,"message":"Upstream provider error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\n" +
			"data: [DONE]\n\n"
		writeBody(w, 200, "text/event-stream", []byte(body))
	})
	m, err := openai.New(openai.Options{Model: "m", BaseURL: base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = streamAll(t, m, &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
	var se *model.StatusError
	if !errors.As(err, &se) || se.StatusCode != 502 || se.Code != "502" || se.Message != "Upstream provider error" {
		t.Fatalf("err = %#v", err)
	}
}

// TestResponsesErrorEvent: an "error" event, with its code at the top
// level as documented or in an error object, is a status error.
func TestResponsesErrorEvent(t *testing.T) {
	for _, event := range []string{
		`{"type":"error","code":"rate_limit_exceeded","message":"Slow down.","param":null,"sequence_number":2}`,
		`{"type":"error","error":{"type":"tokens","code":"rate_limit_exceeded","message":"Slow down.","param":null},"sequence_number":2}`,
	} {
		base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
			created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_e","status":"in_progress","output":[]}}`
			writeBody(w, 200, "text/event-stream", []byte("event: response.created\ndata: "+created+"\n\nevent: error\ndata: "+event+"\n\n"))
		})
		m, err := openai.NewResponses(openai.Options{Model: "m", BaseURL: base, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = streamAll(t, m, &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
		var se *model.StatusError
		if !errors.As(err, &se) || !errors.Is(err, model.ErrRateLimited) || se.Code != "rate_limit_exceeded" || se.Message != "Slow down." {
			t.Errorf("%s: err = %#v", event, err)
		}
	}
}

// TestStreamStallsPastTimeout: a stream that stops sending before its end
// runs into Options.Timeout, which bounds the whole stream, and the error
// says so.
func TestStreamStallsPastTimeout(t *testing.T) {
	for _, api := range faultAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			base, _ := faultServer(t, func(n int, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				_, _ = w.Write(halfStream(api.okStream))
				w.(http.Flusher).Flush()
				<-release
			})
			m, err := api.newModel(openai.Options{Model: "gpt-4o-mini", BaseURL: base, MaxRetries: -1, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			deltas, resp, err := streamAll(t, m, &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
			if !errors.Is(err, model.ErrTimeout) || resp != nil || len(deltas) == 0 {
				t.Fatalf("%d deltas, response %v, err %v; want deltas, then model.ErrTimeout", len(deltas), resp, err)
			}
		})
	}
}
