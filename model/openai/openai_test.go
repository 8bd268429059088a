package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

// newModel returns a model that talks to srv, without retries unless opts
// asks for them.
func newModel(t testing.TB, srv *modeltest.Server, opts openai.Options) *openai.Model {
	t.Helper()
	if opts.Model == "" {
		opts.Model = "test-model"
	}
	opts.BaseURL = srv.URL()
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	m, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recorder is a fake model behind a server that records what reaches it.
type recorder struct {
	mu   sync.Mutex
	reqs []*model.Request
	resp *model.Response
}

func (r *recorder) handle(_ context.Context, req *model.Request) (*model.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return r.resp, nil
}

func (r *recorder) last() *model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// jsonEqual compares JSON documents by value.
var jsonEqual = cmp.Transformer("json", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
})

func TestName(t *testing.T) {
	srv := modeltest.NewServer(nil)
	defer srv.Close()
	if got := newModel(t, srv, openai.Options{Model: "gpt-4o-mini"}).Name(); got != "openai:gpt-4o-mini" {
		t.Errorf("Name() = %q", got)
	}
}

func TestGenerateText(t *testing.T) {
	rec := &recorder{resp: &model.Response{
		Message:      model.AssistantMessage("Hello!"),
		FinishReason: model.FinishStop,
		Usage:        model.Usage{InputTokens: 12, CachedInputTokens: 4, OutputTokens: 3, TotalTokens: 15},
		ID:           "chatcmpl-42",
	}}
	srv := modeltest.NewServer(rec.handle)
	defer srv.Close()
	m := newModel(t, srv, openai.Options{Model: "small"})

	resp, err := m.Generate(t.Context(), &model.Request{
		Messages: []model.Message{model.SystemMessage("Be kind."), model.UserMessage("Hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &model.Response{
		Message:      model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("Hello!")}},
		FinishReason: model.FinishStop,
		Usage:        model.Usage{Requests: 1, InputTokens: 12, CachedInputTokens: 4, OutputTokens: 3, TotalTokens: 15},
		Model:        "small",
		ID:           "chatcmpl-42",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]model.Message{model.SystemMessage("Be kind."), model.UserMessage("Hi")}, rec.last().Messages); diff != "" {
		t.Errorf("messages at the server (-want +got):\n%s", diff)
	}
}

// TestRequestConversion checks that every part of a request reaches an
// OpenAI-compatible server as the server reads it back.
func TestRequestConversion(t *testing.T) {
	temp, parallel := 0.3, false
	png := []byte("\x89PNG\r\n\x1a\n fake image")
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)
	toolCall := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
		{ID: "call_1", Name: "add", Arguments: `{"a": 1, "b":2}`},
		{ID: "call_2", Name: "shot", Arguments: `{}`},
	}}
	history := []model.Message{model.UserMessage("Add 1 and 2, and take a picture."), toolCall}

	tests := []struct {
		name string
		req  *model.Request
		want *model.Request // as the server decodes it
	}{
		{
			name: "tools and tool choice",
			req: &model.Request{
				Messages: []model.Message{model.UserMessage("Add 1 and 2.")},
				Tools: []model.ToolDefinition{
					{Name: "add", Description: "Adds two numbers.", Parameters: schema},
					{Name: "now"},
				},
				ToolChoice:        "add",
				ParallelToolCalls: &parallel,
			},
			want: &model.Request{
				Messages: []model.Message{model.UserMessage("Add 1 and 2.")},
				Tools: []model.ToolDefinition{
					{Name: "add", Description: "Adds two numbers.", Parameters: schema},
					{Name: "now", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
				},
				ToolChoice:        "add",
				ParallelToolCalls: &parallel,
			},
		},
		{
			name: "tool choice required, parallel calls dropped without tools",
			req: &model.Request{
				Messages:          []model.Message{model.UserMessage("x")},
				ToolChoice:        model.ToolChoiceRequired,
				ParallelToolCalls: &parallel,
			},
			want: &model.Request{
				Messages:   []model.Message{model.UserMessage("x")},
				ToolChoice: model.ToolChoiceRequired,
			},
		},
		{
			name: "tool results go back with their ids",
			req: &model.Request{Messages: append(history,
				model.Message{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("3")}},
				model.Message{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "shot", IsError: true, Parts: []model.Part{model.TextPart("camera broken")}},
			)},
			want: &model.Request{Messages: append(history,
				model.Message{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("3")}},
				model.Message{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "shot", Parts: []model.Part{model.TextPart("camera broken")}},
			)},
		},
		{
			name: "images in a tool result follow in a user message",
			req: &model.Request{Messages: append(history,
				model.Message{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("3")}},
				model.Message{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "shot", Parts: []model.Part{
					model.TextPart("Here it is."), model.ImagePart("image/png", png),
				}},
				model.AssistantMessage("Done."),
			)},
			want: &model.Request{Messages: append(history,
				model.Message{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("3")}},
				model.Message{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "shot", Parts: []model.Part{model.TextPart("Here it is.")}},
				model.Message{Role: model.RoleUser, Parts: []model.Part{
					model.TextPart("Images returned by tool call call_2:"), model.ImagePart("image/png", png),
				}},
				model.AssistantMessage("Done."),
			)},
		},
		{
			name: "images in a user message",
			req: &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{
				model.TextPart("Compare"),
				model.ImagePart("image/png", png),
				model.ImagePart("", png), // media type sniffed
				model.ImageURLPart("https://example.com/b.jpg"),
			}}}},
			want: &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{
				model.TextPart("Compare"),
				model.ImagePart("image/png", png),
				model.ImagePart("image/png", png),
				model.ImageURLPart("https://example.com/b.jpg"),
			}}}},
		},
		{
			name: "structured output, temperature and max tokens",
			req: &model.Request{
				Messages:    []model.Message{model.UserMessage("Numbers?")},
				Output:      &model.OutputSchema{Name: "numbers", Schema: schema, Strict: true},
				Temperature: &temp,
				MaxTokens:   64,
			},
			want: &model.Request{
				Messages:    []model.Message{model.UserMessage("Numbers?")},
				Output:      &model.OutputSchema{Name: "numbers", Schema: schema, Strict: true},
				Temperature: &temp,
				MaxTokens:   64,
			},
		},
		{
			name: "output schema without a name",
			req: &model.Request{
				Messages: []model.Message{model.UserMessage("Numbers?")},
				Output:   &model.OutputSchema{Schema: schema},
			},
			want: &model.Request{
				Messages: []model.Message{model.UserMessage("Numbers?")},
				Output:   &model.OutputSchema{Name: "output", Schema: schema},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{resp: modeltest.Text("ok")}
			srv := modeltest.NewServer(rec.handle)
			defer srv.Close()
			m := newModel(t, srv, openai.Options{})
			if _, err := m.Generate(t.Context(), tt.req); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, rec.last(), jsonEqual); diff != "" {
				t.Errorf("request at the server (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	srv := modeltest.NewServer(nil)
	defer srv.Close()
	m := newModel(t, srv, openai.Options{})
	withSchema := func(schema string) *model.Request {
		return &model.Request{
			Messages: []model.Message{model.UserMessage("x")},
			Tools:    []model.ToolDefinition{{Name: "ok", Parameters: json.RawMessage(`{}`)}, {Name: "t", Parameters: json.RawMessage(schema)}},
		}
	}
	tests := []struct {
		name string
		req  *model.Request
		want string // in the error
	}{
		{"image in system message", &model.Request{Messages: []model.Message{{Role: model.RoleSystem, Parts: []model.Part{model.ImageURLPart("https://x/y.png")}}}}, "system message"},
		{"empty image", &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartImage}}}}}, "image"},
		{"unknown role", &model.Request{Messages: []model.Message{{Role: "robot"}}}, "robot"},
		{"array tool schema", withSchema(`[1]`), `tool "t": parameters: schema is an array, want a JSON object`},
		{"null tool schema", withSchema(` null`), `tool "t": parameters: schema is null, want a JSON object`},
		{"malformed tool schema", withSchema(`{"type":`), `tool "t": parameters: schema is not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Generate(t.Context(), tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	if srv.Requests() != 0 {
		t.Errorf("%d invalid requests reached the server", srv.Requests())
	}
}

func TestGenerateToolCalls(t *testing.T) {
	// Arguments come back exactly as the model sent them, even malformed.
	calls := []model.ToolCall{
		{ID: "call_a", Name: "add", Arguments: `{"a": 1,  "b":2}`},
		{ID: "call_b", Name: "broken", Arguments: `{"a": `},
	}
	srv := modeltest.NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(calls...), nil
	})
	defer srv.Close()
	resp, err := newModel(t, srv, openai.Options{}).Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("add")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(calls, resp.Message.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if resp.FinishReason != model.FinishToolCalls || len(resp.Message.Parts) != 0 {
		t.Errorf("finish %q, parts %v", resp.FinishReason, resp.Message.Parts)
	}
	if resp.Usage != (model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 10, TotalTokens: 20}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		sent model.FinishReason
		want model.FinishReason
	}{
		{model.FinishStop, model.FinishStop},
		{model.FinishLength, model.FinishLength},
		{model.FinishContentFilter, model.FinishContentFilter},
		{model.FinishToolCalls, model.FinishToolCalls},
		{"something_new", model.FinishOther},
	}
	for _, tt := range tests {
		srv := modeltest.NewServer(func(context.Context, *model.Request) (*model.Response, error) {
			r := modeltest.Text("x")
			r.FinishReason = tt.sent
			return r, nil
		})
		resp, err := newModel(t, srv, openai.Options{}).Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("x")}})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.FinishReason != tt.want {
			t.Errorf("sent %q: got %q, want %q", tt.sent, resp.FinishReason, tt.want)
		}
	}
}

// collect streams req and returns the deltas and the final response.
func collect(t *testing.T, m *openai.Model, req *model.Request) ([]model.Delta, *model.Response) {
	t.Helper()
	var deltas []model.Delta
	var final *model.Response
	for c, err := range m.GenerateStream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if final != nil {
			t.Fatal("chunk after the response")
		}
		if c.Delta != nil {
			deltas = append(deltas, *c.Delta)
		}
		final = c.Response
	}
	if final == nil {
		t.Fatal("stream ended without a response")
	}
	return deltas, final
}

func TestGenerateStream(t *testing.T) {
	withText := modeltest.ToolCalls(
		modeltest.Call("call_1", "add", `{"a":1,"b":2}`),
		modeltest.Call("call_2", "now", `{}`),
	)
	withText.Message.Parts = []model.Part{model.TextPart("Let me check.")}
	tests := []struct {
		name       string
		resp       *model.Response
		wantDeltas []model.Delta
	}{
		{
			name:       "text",
			resp:       modeltest.Text("The answer is 42."),
			wantDeltas: []model.Delta{{Text: "The"}, {Text: " answer"}, {Text: " is"}, {Text: " 42."}},
		},
		{
			name: "text and tool calls",
			resp: withText,
			wantDeltas: []model.Delta{
				{Text: "Let"}, {Text: " me"}, {Text: " check."},
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_1", Name: "add"}},
				{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `{"a":1`}},
				{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `,"b":2}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_2", Name: "now"}},
				{ToolCall: &model.ToolCallDelta{Index: 1, Arguments: `{`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, Arguments: `}`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(func(context.Context, *model.Request) (*model.Response, error) {
				r := *tt.resp
				r.ID = "chatcmpl-same"
				return &r, nil
			})
			defer srv.Close()
			m := newModel(t, srv, openai.Options{})
			req := &model.Request{Messages: []model.Message{model.UserMessage("go")}}

			deltas, streamed := collect(t, m, req)
			if diff := cmp.Diff(tt.wantDeltas, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			plain, err := m.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(plain, streamed); diff != "" {
				t.Errorf("streamed response differs from the plain one (-plain +streamed):\n%s", diff)
			}
			if streamed.Usage.TotalTokens == 0 {
				t.Error("streamed response has no usage")
			}
		})
	}
}

// closeRecorder is an HTTP transport that records whether response bodies
// were closed and can rewrite requests to another host.
type closeRecorder struct {
	mu     sync.Mutex
	bodies []*trackedBody
	target *url.URL // when set, requests go here instead
	reqs   []recordedRequest
}

type recordedRequest struct {
	header http.Header
	body   []byte
}

type trackedBody struct {
	io.ReadCloser
	mu     sync.Mutex
	closed bool
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func (c *closeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	if c.target != nil {
		r.URL.Scheme, r.URL.Host = c.target.Scheme, c.target.Host
		r.URL.Path = strings.Replace(r.URL.Path, "/v1/", c.target.Path+"/", 1)
		r.Host = ""
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, recordedRequest{header: r.Header.Clone(), body: body})
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{ReadCloser: resp.Body}
	c.bodies = append(c.bodies, tb)
	resp.Body = tb
	return resp, nil
}

func (c *closeRecorder) allClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if !closed {
			return false
		}
	}
	return len(c.bodies) > 0
}

func TestGenerateStreamStopsEarly(t *testing.T) {
	srv := modeltest.NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("one two three four"), nil
	})
	defer srv.Close()
	rt := &closeRecorder{}
	m := newModel(t, srv, openai.Options{HTTPClient: &http.Client{Transport: rt}})
	n := 0
	for c, err := range m.GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("count")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Delta == nil {
			t.Fatal("expected a delta first")
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d chunks", n)
	}
	if !rt.allClosed() {
		t.Error("the response body was not closed when the consumer stopped")
	}
}

func TestHeadersAndMaxTokensField(t *testing.T) {
	srv := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{APIKey: "sk-test"})
	defer srv.Close()
	target, _ := url.Parse(srv.URL())
	tests := []struct {
		name      string
		baseURL   string // "" means OpenAI's API, rerouted to the fake server
		wantField string
		noField   string
	}{
		{"compatible server gets max_tokens", srv.URL(), "max_tokens", "max_completion_tokens"},
		{"OpenAI gets max_completion_tokens", "", "max_completion_tokens", "max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OPENAI_BASE_URL", "")
			rt := &closeRecorder{}
			if tt.baseURL == "" {
				rt.target = target
			}
			m, err := openai.New(openai.Options{
				Model:      "m",
				APIKey:     "sk-test",
				BaseURL:    tt.baseURL,
				MaxRetries: -1,
				HTTPClient: &http.Client{Transport: rt},
				Headers:    map[string]string{"X-Title": "Calf tests"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}, MaxTokens: 9}); err != nil {
				t.Fatal(err)
			}
			got := rt.reqs[0]
			if got.header.Get("X-Title") != "Calf tests" {
				t.Errorf("X-Title header = %q", got.header.Get("X-Title"))
			}
			var body map[string]any
			if err := json.Unmarshal(got.body, &body); err != nil {
				t.Fatal(err)
			}
			if body[tt.wantField] != 9.0 {
				t.Errorf("%s = %v, want 9; body %s", tt.wantField, body[tt.wantField], got.body)
			}
			if _, ok := body[tt.noField]; ok {
				t.Errorf("body has %s too: %s", tt.noField, got.body)
			}
		})
	}
}

func TestAPIKey(t *testing.T) {
	srv := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{APIKey: "right"})
	defer srv.Close()
	req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
	if _, err := newModel(t, srv, openai.Options{APIKey: "right"}).Generate(t.Context(), req); err != nil {
		t.Errorf("right key: %v", err)
	}
	_, err := newModel(t, srv, openai.Options{APIKey: "wrong"}).Generate(t.Context(), req)
	var se *model.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized || se.Provider != "openai" || se.Message == "" {
		t.Errorf("wrong key: err = %v, want a StatusError 401", err)
	}
}

func TestRetries(t *testing.T) {
	const quick = time.Millisecond
	tests := []struct {
		name         string
		failures     int
		status       int
		retries      int
		retryAfter   time.Duration
		wantStatus   int // 0: success
		wantRequests int
	}{
		{"500 once then success, default backoff", 1, 500, 1, 0, 0, 2},
		{"429 then success", 1, 429, 1, quick, 0, 2},
		{"503 twice then success", 2, 503, 2, quick, 0, 3},
		{"400 is not retried", 1, 400, 2, quick, 400, 1},
		{"retries exhausted", 5, 500, 2, quick, 500, 3},
		{"retries disabled", 1, 500, -1, quick, 500, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServerWithOptions(func(context.Context, *model.Request) (*model.Response, error) {
				return modeltest.Text("fine"), nil
			}, &modeltest.ServerOptions{RetryAfter: tt.retryAfter})
			defer srv.Close()
			srv.FailNext(tt.failures, tt.status)
			m := newModel(t, srv, openai.Options{MaxRetries: tt.retries})
			resp, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Text() != "fine" {
					t.Errorf("text %q", resp.Message.Text())
				}
			} else {
				var se *model.StatusError
				if !errors.As(err, &se) || se.StatusCode != tt.wantStatus || se.Provider != "openai" {
					t.Fatalf("err = %v, want StatusError %d", err, tt.wantStatus)
				}
				if !strings.Contains(se.Message, "injected failure") {
					t.Errorf("message %q does not carry the server's", se.Message)
				}
			}
			if srv.Requests() != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", srv.Requests(), tt.wantRequests)
			}
		})
	}
}

func TestStreamRetriesAndErrors(t *testing.T) {
	srv := modeltest.NewServerWithOptions(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("fine"), nil
	}, &modeltest.ServerOptions{RetryAfter: time.Millisecond})
	defer srv.Close()
	m := newModel(t, srv, openai.Options{MaxRetries: 1})
	req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}

	srv.FailNext(1, 502)
	if _, final := collect(t, m, req); final.Message.Text() != "fine" {
		t.Errorf("text %q", final.Message.Text())
	}
	srv.FailNext(2, 400)
	var errs []error
	for _, err := range m.GenerateStream(t.Context(), req) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var se *model.StatusError
	if len(errs) != 1 || !errors.As(errs[0], &se) || se.StatusCode != 400 {
		t.Errorf("errors %v, want one StatusError 400", errs)
	}
	if srv.Requests() != 3 {
		t.Errorf("server saw %d requests, want 3", srv.Requests())
	}
}

// hung returns a handler that never answers and a channel closed when it
// has been called.
func hung() (modeltest.ServerHandler, <-chan struct{}) {
	started := make(chan struct{})
	var once sync.Once
	return func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	}, started
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // Options.Timeout
		ctxTime time.Duration // deadline of ctx; 0 for none
		stream  bool
	}{
		{name: "per-request timeout", timeout: 200 * time.Millisecond},
		{name: "ctx deadline", timeout: -1, ctxTime: 200 * time.Millisecond},
		{name: "stream per-request timeout", timeout: 200 * time.Millisecond, stream: true},
		{name: "stream ctx deadline", timeout: -1, ctxTime: 200 * time.Millisecond, stream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := hung()
			srv := modeltest.NewServer(h)
			defer srv.Close()
			m := newModel(t, srv, openai.Options{Timeout: tt.timeout, MaxRetries: 2})
			ctx := t.Context()
			if tt.ctxTime > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTime)
				defer cancel()
			}
			req := &model.Request{Messages: []model.Message{model.UserMessage("hello?")}}
			start := time.Now()
			var err error
			if tt.stream {
				for _, e := range m.GenerateStream(ctx, req) {
					if e != nil {
						err = e
					}
				}
			} else {
				_, err = m.Generate(ctx, req)
			}
			if !errors.Is(err, model.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want model.ErrTimeout and context.DeadlineExceeded", err)
			}
			// Promptness, not speed: a timed-out attempt is not retried and the
			// call does not wait for the server.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("returned after %v", d)
			}
			// The one attempt may time out before the server has read it
			// (a loaded machine); it is never retried.
			if n := srv.Requests(); n > 1 {
				t.Errorf("server saw %d requests, want at most 1: a timed-out attempt was retried", n)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		h, started := hung()
		srv := modeltest.NewServer(h)
		m := newModel(t, srv, openai.Options{MaxRetries: 2})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-started
			cancel()
		}()
		req := &model.Request{Messages: []model.Message{model.UserMessage("hello?")}}
		start := time.Now()
		var err error
		if stream {
			for _, e := range m.GenerateStream(ctx, req) {
				if e != nil {
					err = e
				}
			}
		} else {
			_, err = m.Generate(ctx, req)
		}
		if !errors.Is(err, context.Canceled) || errors.Is(err, model.ErrTimeout) {
			t.Errorf("stream %v: err = %v, want context.Canceled", stream, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("stream %v: returned after %v", stream, d)
		}
		srv.Close()
	}
}

// rawServer serves every request with the given status, content type and
// body.
func rawServer(t *testing.T, status int, contentType, body string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s.URL + "/v1"
}

func TestUnusualServerAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantStatus  int
		wantMessage string
		wantErr     error
	}{
		{"plain text error", 502, "text/plain", "upstream down\n", 502, "upstream down", nil},
		{"error as a string", 404, "application/json", `{"error":"model \"x\" not found"}`, 404, `model "x" not found`, nil},
		{"error object", 400, "application/json", `{"error":{"message":"bad field","type":"invalid_request_error"}}`, 400, "bad field", nil},
		{"empty error body", 503, "application/json", ``, 503, "Service Unavailable", nil},
		{"no choices", 200, "application/json", `{"id":"x","object":"chat.completion","model":"m","choices":[]}`, 0, "", openai.ErrEmptyResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := openai.New(openai.Options{Model: "m", BaseURL: rawServer(t, tt.status, tt.contentType, tt.body), MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			var se *model.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want a StatusError", err, err)
			}
			if se.StatusCode != tt.wantStatus || se.Message != tt.wantMessage {
				t.Errorf("got %d %q, want %d %q", se.StatusCode, se.Message, tt.wantStatus, tt.wantMessage)
			}
		})
	}
}

func TestAnswerNotJSON(t *testing.T) {
	for _, tt := range []struct{ contentType, body string }{
		{"text/html", "<html>gateway</html>"},
		{"application/json", `{"choices":[`},
	} {
		t.Run(tt.contentType, func(t *testing.T) {
			m, err := openai.New(openai.Options{Model: "m", BaseURL: rawServer(t, 200, tt.contentType, tt.body), MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
			if err == nil || !strings.Contains(err.Error(), "is not a JSON chat completion") || !strings.Contains(err.Error(), tt.contentType) {
				t.Errorf("err = %v, want one saying the answer is not a JSON chat completion", err)
			}
		})
	}
}

func TestStreamWithoutChoices(t *testing.T) {
	url := rawServer(t, 200, "text/event-stream", "data: [DONE]\n\n")
	m, err := openai.New(openai.Options{Model: "m", BaseURL: url, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var gotErr error
	for _, err := range m.GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		gotErr = err
	}
	if !errors.Is(gotErr, openai.ErrEmptyResponse) {
		t.Errorf("err = %v, want ErrEmptyResponse", gotErr)
	}
}

func TestNewAndFromEnv(t *testing.T) {
	srv := modeltest.NewServer(nil)
	defer srv.Close()

	t.Run("nothing configured", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "")
		t.Setenv("OPENAI_BASE_URL", "")
		_, err := openai.FromEnv("gpt-4o-mini")
		if !errors.Is(err, model.ErrNoModel) {
			t.Fatalf("err = %v, want model.ErrNoModel", err)
		}
		for _, s := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %s", err, s)
			}
		}
	})
	t.Run("no model name", func(t *testing.T) {
		if _, err := openai.New(openai.Options{BaseURL: srv.URL()}); !errors.Is(err, model.ErrNoModel) {
			t.Errorf("err = %v, want model.ErrNoModel", err)
		}
	})
	t.Run("bad base URL", func(t *testing.T) {
		if _, err := openai.New(openai.Options{Model: "m", BaseURL: "127.0.0.1:11434"}); err == nil {
			t.Error("no error")
		}
	})
	t.Run("base URL from the environment, no key", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "")
		t.Setenv("OPENAI_BASE_URL", srv.URL())
		m, err := openai.FromEnv("llama3.2")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("echo")}})
		if err != nil || resp.Message.Text() != "echo" || resp.Model != "llama3.2" {
			t.Fatalf("Generate = %+v, %v", resp, err)
		}
	})
	t.Run("key from the environment", func(t *testing.T) {
		keyed := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{APIKey: "env-key"})
		defer keyed.Close()
		t.Setenv("OPENAI_API_KEY", "env-key")
		t.Setenv("OPENAI_BASE_URL", keyed.URL())
		m, err := openai.FromEnv("m")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("x")}}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLogger(t *testing.T) {
	srv := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{RetryAfter: time.Millisecond})
	defer srv.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := newModel(t, srv, openai.Options{Logger: log, MaxRetries: 1, APIKey: "sk-secret"})
	srv.FailNext(1, 500)
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("x")}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "openai: http attempt"); n != 2 {
		t.Errorf("%d attempt records, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "status=500") || !strings.Contains(out, "status=200") {
		t.Errorf("records lack the statuses:\n%s", out)
	}

	buf.Reset()
	log.Info("config", "options", openai.Options{Model: "m", APIKey: "sk-secret"})
	if strings.Contains(buf.String(), "sk-secret") || !strings.Contains(buf.String(), "REDACTED") {
		t.Errorf("API key not redacted: %s", buf.String())
	}
}

func BenchmarkGenerate(b *testing.B) {
	srv := modeltest.NewServer(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("Paris is the capital of France."), nil
	})
	defer srv.Close()
	m := newModel(b, srv, openai.Options{})
	req := &model.Request{Messages: []model.Message{
		model.SystemMessage("You answer in one sentence."),
		model.UserMessage("What is the capital of France?"),
	}}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Generate(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, err := range m.GenerateStream(b.Context(), req) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	// The floor: the same exchange with net/http and encoding/json alone,
	// against the same server, so that the difference from "plain" is what
	// the adapter and its transport cost.
	b.Run("bare-http", func(b *testing.B) {
		body := []byte(`{"model":"test-model","messages":[{"role":"system","content":"You answer in one sentence."},` +
			`{"role":"user","content":"What is the capital of France?"}]}`)
		client := &http.Client{}
		b.ReportAllocs()
		for b.Loop() {
			hreq, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL()+"/chat/completions", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			hreq.Header.Set("Content-Type", "application/json")
			hreq.Header.Set("Authorization", "Bearer test")
			resp, err := client.Do(hreq)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("HTTP %d, %v", resp.StatusCode, err)
			}
			var c struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
				b.Fatalf("answer %s: %v", data, err)
			}
		}
	})
}

// bodyKinds is a transport that records, for each request, whether its
// body is one net/http can write together with the headers: an in-memory
// reader (it implements io.WriterTo) rather than an opaque stream.
type bodyKinds struct {
	mu       sync.Mutex
	inMemory []bool
}

func (b *bodyKinds) RoundTrip(r *http.Request) (*http.Response, error) {
	_, ok := r.Body.(io.WriterTo)
	b.mu.Lock()
	b.inMemory = append(b.inMemory, ok)
	b.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestBodySentInMemory: every attempt's body reaches net/http as an
// in-memory reader, retries included, so that the headers and the body go
// out in one write.
func TestBodySentInMemory(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !json.Valid(body) || r.ContentLength != int64(len(body)) {
			t.Errorf("body %q with content length %d", body, r.ContentLength)
		}
		if calls.Add(1) == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	kinds := &bodyKinds{}
	m, err := openai.New(openai.Options{Model: "m", BaseURL: srv.URL, APIKey: "k", MaxRetries: 2,
		HTTPClient: &http.Client{Transport: kinds}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true}; !slices.Equal(kinds.inMemory, want) {
		t.Errorf("in-memory bodies per attempt = %v, want %v", kinds.inMemory, want)
	}
}

// A 404 or 405 from a base URL whose path does not end in /v1 asks whether
// /v1 is missing; from one that ends in /v1, or for another status, the
// server's message is left alone.
func TestMissingV1Hint(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nothing here", int(status.Load()))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		base   string
		status int
		hint   bool
	}{
		{srv.URL, http.StatusMethodNotAllowed, true},
		{srv.URL + "/", http.StatusNotFound, true},
		{srv.URL + "/api", http.StatusNotFound, true},
		{srv.URL + "/v1", http.StatusNotFound, false},
		{srv.URL + "/v1/", http.StatusMethodNotAllowed, false},
		{srv.URL, http.StatusBadRequest, false},
	} {
		status.Store(int64(tt.status))
		m, err := openai.New(openai.Options{Model: "m", BaseURL: tt.base, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
		var se *model.StatusError
		if !errors.As(err, &se) || se.StatusCode != tt.status || !strings.Contains(se.Message, "nothing here") {
			t.Fatalf("%s, HTTP %d: err = %v", tt.base, tt.status, err)
		}
		hint := "(is the base URL " + strings.TrimRight(tt.base, "/")
		if got := strings.Contains(se.Message, "missing /v1?"); got != tt.hint || (got && !strings.Contains(se.Message, hint)) {
			t.Errorf("%s, HTTP %d: message %q, want the hint: %v", tt.base, tt.status, se.Message, tt.hint)
		}
	}
}
