package modeltest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
)

// post sends body to the server's chat completions endpoint.
func post(t *testing.T, s *Server, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decodeBody[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestServerDecodesRequest(t *testing.T) {
	var got *model.Request
	var gotModel string
	s := NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		got, gotModel = req, RequestedModel(ctx)
		return Text("ok"), nil
	})
	defer s.Close()

	body := `{
	  "model": "gpt-test",
	  "messages": [
	    {"role": "system", "content": "Be brief."},
	    {"role": "developer", "content": [{"type": "text", "text": "Really."}]},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is this?"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID", "detail": "low"}},
	      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
	    ]},
	    {"role": "assistant", "content": null, "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"zoom\": 2 }"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
	    {"role": "assistant", "content": "A cat."}
	  ],
	  "tools": [{"type": "function", "function": {"name": "look", "description": "Looks closer.",
	    "parameters": {"type": "object", "properties": {"zoom": {"type": "integer"}}}}}],
	  "tool_choice": {"type": "function", "function": {"name": "look"}},
	  "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true, "schema": {"type": "object"}}},
	  "temperature": 0.2,
	  "max_completion_tokens": 100,
	  "max_tokens": 50,
	  "parallel_tool_calls": false
	}`
	resp := post(t, s, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	temp, parallel := 0.2, false
	want := &model.Request{
		Messages: []model.Message{
			model.SystemMessage("Be brief."),
			model.SystemMessage("Really."),
			{Role: model.RoleUser, Parts: []model.Part{
				model.TextPart("What is this?"),
				model.ImagePart("image/png", []byte{1, 2, 3}),
				model.ImageURLPart("https://example.com/cat.png"),
			}},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Name: "look", Arguments: `{"zoom": 2 }`}}},
			{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "look", Parts: []model.Part{model.TextPart("a cat")}},
			model.AssistantMessage("A cat."),
		},
		Tools: []model.ToolDefinition{{
			Name: "look", Description: "Looks closer.",
			Parameters: json.RawMessage(`{"type": "object", "properties": {"zoom": {"type": "integer"}}}`),
		}},
		ToolChoice:        "look",
		Output:            &model.OutputSchema{Name: "answer", Schema: json.RawMessage(`{"type": "object"}`), Strict: true},
		Temperature:       &temp,
		MaxTokens:         100,
		ParallelToolCalls: &parallel,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded request (-want +got):\n%s", diff)
	}
	if gotModel != "gpt-test" {
		t.Errorf("RequestedModel = %q, want gpt-test", gotModel)
	}
}

func TestServerDecodesToolChoiceAndMaxTokens(t *testing.T) {
	tests := []struct {
		extra      string
		wantChoice model.ToolChoice
		wantMax    int
	}{
		{`"tool_choice": "auto", "max_tokens": 7`, model.ToolChoiceAuto, 7},
		{`"tool_choice": "none"`, model.ToolChoiceNone, 0},
		{`"tool_choice": "required"`, model.ToolChoiceRequired, 0},
		{`"tool_choice": null`, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.extra, func(t *testing.T) {
			var got *model.Request
			s := NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
				got = req
				return Text("ok"), nil
			})
			defer s.Close()
			resp := post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}],`+tt.extra+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got.ToolChoice != tt.wantChoice || got.MaxTokens != tt.wantMax {
				t.Errorf("tool choice %q, max tokens %d; want %q, %d", got.ToolChoice, got.MaxTokens, tt.wantChoice, tt.wantMax)
			}
		})
	}
}

func TestServerRejectsBadRequests(t *testing.T) {
	s := NewServer(nil)
	defer s.Close()
	tests := []struct {
		name string
		body string
	}{
		{"not json", `{`},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"no messages", `{"model":"m","messages":[]}`},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`},
		{"tool message without id", `{"model":"m","messages":[{"role":"tool","content":"hi"}]}`},
		{"bad part", `{"model":"m","messages":[{"role":"user","content":[{"type":"audio"}]}]}`},
		{"bad tool choice", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"sometimes"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, s, tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
			e := decodeBody[wireError](t, resp)
			if e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
				t.Errorf("error body %+v", e)
			}
		})
	}
}

func TestServerEncodesResponse(t *testing.T) {
	s := NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		r := ToolCalls(Call("call_1", "add", `{"a": 1}`))
		r.Message.Parts = []model.Part{model.TextPart("Adding.")}
		return r, nil
	})
	defer s.Close()
	resp := post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	delete(got, "created")
	want := map[string]any{
		"id": "chatcmpl-test-1", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{
			"index": 0.0, "finish_reason": "tool_calls",
			"message": map[string]any{
				"role": "assistant", "content": "Adding.",
				"tool_calls": []any{map[string]any{
					"id": "call_1", "type": "function",
					"function": map[string]any{"name": "add", "arguments": `{"a": 1}`},
				}},
			},
		}},
		"usage": map[string]any{"prompt_tokens": 10.0, "completion_tokens": 5.0, "total_tokens": 15.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// readEvents returns the data lines of a server-sent event stream.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		events = append(events, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func TestServerStreams(t *testing.T) {
	s := NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		r := ToolCalls(Call("c1", "add", `{"a":1}`), Call("c2", "sub", `{"b":2}`))
		r.Message.Parts = []model.Part{model.TextPart("Two calls now")}
		r.ID = "chatcmpl-fixed"
		return r, nil
	})
	defer s.Close()

	for _, includeUsage := range []bool{false, true} {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if includeUsage {
			body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		resp := post(t, s, body)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		events := readEvents(t, resp.Body)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
		}
		var (
			text     strings.Builder
			contents int
			calls    []string
			finish   []string
			usage    *wireUsage
		)
		for _, e := range events[:len(events)-1] {
			var c wireCompletion
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatal(err)
			}
			if c.ID != "chatcmpl-fixed" || c.Object != "chat.completion.chunk" || c.Model != "m" {
				t.Errorf("chunk header %+v", c)
			}
			if c.Usage != nil {
				usage = c.Usage
				if len(c.Choices) != 0 {
					t.Error("usage chunk with choices")
				}
			}
			for _, ch := range c.Choices {
				if ch.FinishReason != nil {
					finish = append(finish, *ch.FinishReason)
				}
				if ch.Delta.Content != nil && *ch.Delta.Content != "" {
					contents++
					text.WriteString(*ch.Delta.Content)
				}
				for _, tc := range ch.Delta.ToolCalls {
					b, _ := json.Marshal(tc)
					calls = append(calls, string(b))
				}
			}
		}
		if text.String() != "Two calls now" || contents != 3 {
			t.Errorf("text %q in %d chunks, want %q in 3", text.String(), contents, "Two calls now")
		}
		wantCalls := []string{
			`{"index":0,"id":"c1","type":"function","function":{"name":"add","arguments":""}}`,
			`{"index":0,"function":{"arguments":"{\"a"}}`,
			`{"index":0,"function":{"arguments":"\":1}"}}`,
			`{"index":1,"id":"c2","type":"function","function":{"name":"sub","arguments":""}}`,
			`{"index":1,"function":{"arguments":"{\"b"}}`,
			`{"index":1,"function":{"arguments":"\":2}"}}`,
		}
		if diff := cmp.Diff(wantCalls, calls); diff != "" {
			t.Errorf("tool call deltas (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"tool_calls"}, finish); diff != "" {
			t.Errorf("finish reasons (-want +got):\n%s", diff)
		}
		if includeUsage != (usage != nil) {
			t.Fatalf("include_usage %v, usage chunk %v", includeUsage, usage)
		}
		if usage != nil && *usage != (wireUsage{PromptTokens: 10, CompletionTokens: 10, TotalTokens: 20}) {
			t.Errorf("usage %+v", *usage)
		}
	}
}

func TestServerFailNext(t *testing.T) {
	s := NewServerWithOptions(nil, &ServerOptions{RetryAfter: 20 * time.Millisecond})
	defer s.Close()
	s.FailNext(2, http.StatusTooManyRequests)
	body := `{"model":"m","messages":[{"role":"user","content":"echo me"}]}`
	for i := range 2 {
		resp := post(t, s, body)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d, want 429", i, resp.StatusCode)
		}
		if got := resp.Header.Get("Retry-After-Ms"); got != "20" {
			t.Errorf("Retry-After-Ms = %q, want 20", got)
		}
		if e := decodeBody[wireError](t, resp); e.Error.Type != "rate_limit_error" || e.Error.Message == "" {
			t.Errorf("error body %+v", e)
		}
	}
	resp := post(t, s, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d after the failures, want 200", resp.StatusCode)
	}
	c := decodeBody[wireCompletion](t, resp)
	if got := *c.Choices[0].Message.Content; got != "echo me" {
		t.Errorf("echo = %q", got)
	}
	if s.Requests() != 3 {
		t.Errorf("Requests() = %d, want 3", s.Requests())
	}
}

func TestServerHandlerErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantType   string
	}{
		{"status error", &model.StatusError{Provider: "test", StatusCode: 404, Message: "no such model"}, 404, "invalid_request_error"},
		{"wrapped status error", errors.Join(errors.New("x"), &model.StatusError{StatusCode: 503, Message: "busy"}), 503, "server_error"},
		{"plain error", errors.New("exploded"), 500, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(func(context.Context, *model.Request) (*model.Response, error) { return nil, tt.err })
			defer s.Close()
			resp := post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if e := decodeBody[wireError](t, resp); e.Error.Type != tt.wantType || e.Error.Message == "" {
				t.Errorf("error body %+v", e)
			}
		})
	}
}

func TestServerAuth(t *testing.T) {
	s := NewServerWithOptions(nil, &ServerOptions{APIKey: "sekret"})
	defer s.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		header     []string
		wantStatus int
	}{
		{nil, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer sekret"}, http.StatusOK},
	}
	for _, tt := range tests {
		if resp := post(t, s, body, tt.header...); resp.StatusCode != tt.wantStatus {
			t.Errorf("header %v: status %d, want %d", tt.header, resp.StatusCode, tt.wantStatus)
		}
	}
}

func TestServerModelsAndRoutes(t *testing.T) {
	s := NewServerWithOptions(nil, &ServerOptions{Models: []string{"a", "b"}})
	defer s.Close()
	resp, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	list := decodeBody[struct {
		Object string
		Data   []struct{ ID, Object string }
	}](t, resp)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if list.Object != "list" || !cmp.Equal(ids, []string{"a", "b"}) {
		t.Errorf("models = %+v", list)
	}

	resp2, err := http.Get(s.URL() + "/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Errorf("unknown route: status %d, want 404", resp2.StatusCode)
	}
	if s.Requests() != 0 {
		t.Errorf("Requests() = %d, want 0: only chat completions count", s.Requests())
	}
}

func TestServerHungHandler(t *testing.T) {
	started := make(chan struct{})
	done := make(chan error, 1)
	s := NewServer(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		close(started)
		<-ctx.Done()
		done <- ctx.Err()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-started
	s.Close() // must not wait for the client to give up
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx error = %v, want context.Canceled", err)
	}
	if err := <-clientErr; err == nil {
		t.Error("client got a response from a hung handler")
	}
}

func TestServerWithTestModel(t *testing.T) {
	m := NewTestModel(Text("scripted"))
	s := NewServer(m.Generate)
	defer s.Close()
	resp := post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	c := decodeBody[wireCompletion](t, resp)
	if got := *c.Choices[0].Message.Content; got != "scripted" {
		t.Errorf("content %q", got)
	}
	if diff := cmp.Diff([]model.Message{model.UserMessage("hi")}, m.Requests()[0].Messages); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AQID"}}]}],"tool_choice":{"type":"function","function":{"name":"x"}}}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"response_format":{"type":"json_schema","json_schema":{"name":"n"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w, req, err := decodeRequest(body)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not match errBadRequest", err)
			}
			return
		}
		if w.Model == "" || len(req.Messages) == 0 || len(req.Messages) != len(w.Messages) {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}

func BenchmarkServer(b *testing.B) {
	s := NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		return Text("Hello there, friend."), nil
	})
	defer s.Close()
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	for _, stream := range []bool{false, true} {
		name, payload := "plain", body
		if stream {
			name = "stream"
			payload = bytes.Replace(body, []byte(`{"model"`), []byte(`{"stream":true,"model"`), 1)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(payload))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
