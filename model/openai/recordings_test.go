package openai_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// Recordings of real traffic (shared/recordings, see its README) that this
// package's tests replay:
//
//   - openai/langchaingo__TestClient_CreateChatCompletion: plain completion.
//   - openai/langchaingo__TestClient_CreateChatCompletionStream: a streamed
//     completion with stream_options.include_usage and [DONE].
//   - openai/langchaingo__TestFunctionCall: a tool call.
//   - openai/langchaingo__TestClient_FunctionCall: the deprecated functions
//     form; the adapter offers tools instead (a difference the test lists)
//     and reads the function_call answer as a tool call.
//   - openai/langchaingo__TestClient_WithResponseFormat: JSON mode
//     (json_object), which has no neutral form (a difference the test lists).
//   - openai/langchaingo__TestStructuredOutputObjectSchema: json_schema
//     structured output with a system message.
//   - openai/langchaingo__TestMultiContentImage: an image_url content part.
//   - openai/langchaingo__TestMultiContentTextChatSequence: a multi-turn
//     history.
//   - openai/langchaingo__TestClient_CreateEmbedding: embeddings
//     (TestRecordedEmbeddings).
//   - openrouter/langchaingo__TestOpenRouterStreaming: a streamed
//     completion with OpenRouter's comment line and extras, then a 429
//     (TestRecordedOpenRouter).
//
// Not covered: none of the Ollama recordings (ollama/*) is a chat
// completion on /v1: they are Ollama's native API (/api/chat,
// /api/generate, /api/embed, /api/pull), which this package does not speak.
// No recording covers the Responses API: its tests use fakes shaped after
// OpenAI's documented events (responses_test.go).

// decodeChatRequest reads a recorded chat completion request's body into
// the neutral request it stands for, as a caller of the adapter would
// have written it.
func decodeChatRequest(t *testing.T, body []byte) (*model.Request, bool) {
	t.Helper()
	var w struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function model.ToolDefinition `json:"function"`
		} `json:"tools"`
		Functions      []model.ToolDefinition `json:"functions"`
		ResponseFormat *struct {
			Type       string              `json:"type"`
			JSONSchema *model.OutputSchema `json:"json_schema"`
		} `json:"response_format"`
		Temperature         *float64 `json:"temperature"`
		MaxTokens           int      `json:"max_tokens"`
		MaxCompletionTokens int      `json:"max_completion_tokens"`
		Stream              bool     `json:"stream"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("recorded request: %v", err)
	}
	req := &model.Request{Temperature: w.Temperature, MaxTokens: max(w.MaxTokens, w.MaxCompletionTokens)}
	for _, m := range w.Messages {
		msg := model.Message{Role: model.Role(m.Role)}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			msg.Parts = []model.Part{model.TextPart(text)}
		} else {
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				t.Fatalf("recorded message content %s: %v", m.Content, err)
			}
			for _, p := range parts {
				switch p.Type {
				case "text":
					msg.Parts = append(msg.Parts, model.TextPart(p.Text))
				case "image_url":
					msg.Parts = append(msg.Parts, model.ImageURLPart(p.ImageURL.URL))
				}
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, tl := range w.Tools {
		req.Tools = append(req.Tools, tl.Function)
	}
	req.Tools = append(req.Tools, w.Functions...)
	if f := w.ResponseFormat; f != nil && f.JSONSchema != nil {
		req.Output = f.JSONSchema
	}
	return req, w.Stream
}

// compareShapes compares the JSON bodies of a recorded request and of the
// adapter's, key by key: every top-level key of either must hold the same
// value in both, but those that differ lists with the reason.
func compareShapes(t *testing.T, recorded, ours []byte, differ map[string]string) {
	t.Helper()
	var rec, got map[string]any
	if err := json.Unmarshal(recorded, &rec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ours, &got); err != nil {
		t.Fatalf("our request is not JSON: %v", err)
	}
	keys := map[string]bool{}
	for k := range rec {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := differ[k]; ok {
			continue
		}
		if diff := cmp.Diff(rec[k], got[k]); diff != "" {
			t.Errorf("request field %q (-recorded +ours):\n%s", k, diff)
		}
	}
}

func TestRecordedChatCompletions(t *testing.T) {
	usage := func(in, out int64) model.Usage {
		return model.Usage{Requests: 1, InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	}
	tests := []struct {
		file       string
		wantText   string // a prefix of the text, for long ones
		wantDeltas []string
		wantCalls  []model.ToolCall
		wantFinish model.FinishReason
		wantUsage  model.Usage
		wantModel  string
		wantID     string
		differ     map[string]string // request fields that differ, and why
	}{
		{
			file:       "langchaingo__TestClient_CreateChatCompletion.httprr",
			wantText:   "Hello! I'm just a computer program, so I don't have feelings, but I'm here to help you. How can I assist you today?",
			wantFinish: model.FinishStop, wantUsage: usage(13, 31),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6bhxDl79vlojU2DYKbzyDh0FmLZY",
		},
		{
			file:       "langchaingo__TestClient_CreateChatCompletionStream.httprr",
			wantText:   "1, 2, 3, 4, 5",
			wantDeltas: []string{"1", ",", " ", "2", ",", " ", "3", ",", " ", "4", ",", " ", "5"},
			wantFinish: model.FinishStop, wantUsage: usage(14, 13),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6bjxzOr3Oz1rTiafksd6himIit3q",
		},
		{
			file:       "langchaingo__TestFunctionCall.httprr",
			wantCalls:  []model.ToolCall{{ID: "call_olc8qHf1RDItRqwuEBNjsu3B", Name: "getCurrentWeather", Arguments: `{"location":"Boston"}`}},
			wantFinish: model.FinishToolCalls, wantUsage: usage(81, 14),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6coS1jncfSG1hcFv7v36PkpgHlBq",
		},
		{
			file:       "langchaingo__TestClient_FunctionCall.httprr",
			wantCalls:  []model.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: `{"location":"Boston"}`}},
			wantFinish: model.FinishToolCalls, wantUsage: usage(62, 14),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6bkF43YPpt2nQKdjU5XrPT0JYIzS",
			differ: map[string]string{
				"functions": "the adapter offers tools, not the deprecated functions",
				"tools":     "the adapter offers tools, not the deprecated functions",
			},
		},
		{
			file:       "langchaingo__TestClient_WithResponseFormat.httprr",
			wantText:   "{\n  \"greeting\": \"hello\"\n}",
			wantFinish: model.FinishStop, wantUsage: usage(21, 10),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6bkNglXDIjWwmE0eFbf6nL1scb8r",
			differ: map[string]string{
				"response_format": "JSON mode (json_object) has no neutral form; model.Request.Output is sent as json_schema",
			},
		},
		{
			file:       "langchaingo__TestStructuredOutputObjectSchema.httprr",
			wantText:   `{"final_answer":"4"}`,
			wantFinish: model.FinishStop, wantUsage: usage(53, 6),
			wantModel: "gpt-4o-2024-08-06", wantID: "chatcmpl-C6coVnCXLoW5x80BoWWrkccMpvrEC",
		},
		{
			file:       "langchaingo__TestMultiContentImage.httprr",
			wantText:   "The image is an emoji of a parrot.",
			wantFinish: model.FinishStop, wantUsage: usage(267, 106),
			wantModel: "gpt-4o-2024-08-06", wantID: "chatcmpl-C6coLhcmqwXQ9sZnQ0UvmXGGVNcYU",
		},
		{
			file:       "langchaingo__TestMultiContentTextChatSequence.httprr",
			wantText:   "Spain is larger in terms of land area compared to Lesotho.",
			wantFinish: model.FinishStop, wantUsage: usage(29, 44),
			wantModel: "gpt-3.5-turbo-0125", wantID: "chatcmpl-C6coIfZbj2NXNsdNqj40EWa2iwpGU",
		},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".httprr"), func(t *testing.T) {
			ex := recording(t, "openai", tt.file)
			if len(ex) != 1 {
				t.Fatalf("%d exchanges, want 1", len(ex))
			}
			rec := ex[0]
			req, stream := decodeChatRequest(t, rec.body)
			r := replay(t, ex)
			m, err := openai.New(openai.Options{Model: "gpt-placeholder", BaseURL: baseOf(t, rec.url, "chat/completions"),
				APIKey: "test-api-key", HTTPClient: r.client(), MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			var resp *model.Response
			var deltas []string
			if stream {
				for c, err := range m.GenerateStream(t.Context(), req) {
					if err != nil {
						t.Fatal(err)
					}
					if c.Delta != nil {
						deltas = append(deltas, c.Delta.Text)
					}
					if c.Response != nil {
						resp = c.Response
					}
				}
			} else if resp, err = m.Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}

			// What the adapter makes of the recorded answer.
			if got := resp.Message.Text(); !strings.HasPrefix(got, tt.wantText) || (tt.wantText == "") != (got == "") {
				t.Errorf("text %q, want %q", got, tt.wantText)
			}
			if diff := cmp.Diff(tt.wantDeltas, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, resp.Message.ToolCalls); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if resp.FinishReason != tt.wantFinish || resp.Usage != tt.wantUsage || resp.Model != tt.wantModel || resp.ID != tt.wantID {
				t.Errorf("finish %q, usage %+v, model %q, id %q; want %q, %+v, %q, %q",
					resp.FinishReason, resp.Usage, resp.Model, resp.ID, tt.wantFinish, tt.wantUsage, tt.wantModel, tt.wantID)
			}

			// What the adapter sent for the same conversation, beside what
			// the recorded client sent. The model is the recorded one:
			// Options.Model stood in for it.
			sent := r.requests()[0]
			var body map[string]any
			if err := json.Unmarshal(sent.body, &body); err != nil {
				t.Fatal(err)
			}
			var recBody map[string]any
			_ = json.Unmarshal(rec.body, &recBody)
			body["model"] = recBody["model"]
			ours, _ := json.Marshal(body)
			compareShapes(t, rec.body, ours, tt.differ)
			checkHeaders(t, rec, sent)
		})
	}
}

// checkHeaders compares the request line and the headers that matter.
func checkHeaders(t *testing.T, rec exchange, sent sentRequest) {
	t.Helper()
	if sent.method != rec.method || sent.host+sent.url.Path != strings.TrimPrefix(strings.TrimPrefix(rec.url, "https://"), "http://") {
		t.Errorf("sent %s %s%s, recorded %s %s", sent.method, sent.host, sent.url.Path, rec.method, rec.url)
	}
	for _, h := range []string{"Authorization", "Content-Type"} {
		if got, want := sent.header.Get(h), rec.header.Get(h); got != want {
			t.Errorf("header %s: %q, recorded %q", h, got, want)
		}
	}
}

func TestRecordedOpenRouter(t *testing.T) {
	ex := recording(t, "openrouter", "langchaingo__TestOpenRouterStreaming.httprr")
	if len(ex) != 2 {
		t.Fatalf("%d exchanges, want 2", len(ex))
	}
	r := replay(t, ex)
	m, err := openai.New(openai.Options{Model: "meta-llama/llama-3.2-3b-instruct:free", BaseURL: baseOf(t, ex[0].url, "chat/completions"),
		APIKey: "test-api-key", HTTPClient: r.client(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}

	// 1: a stream with a comment line, empty deltas, the finish reason
	// before the usage chunk, and OpenRouter's extras.
	req, stream := decodeChatRequest(t, ex[0].body)
	if !stream {
		t.Fatal("the first recorded request does not stream")
	}
	var deltas []string
	var resp *model.Response
	for c, err := range m.GenerateStream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Delta != nil {
			deltas = append(deltas, c.Delta.Text)
		}
		if c.Response != nil {
			resp = c.Response
		}
	}
	want := &model.Response{
		Message:      model.AssistantMessage("test response"),
		FinishReason: model.FinishStop,
		Usage:        model.Usage{Requests: 1, InputTokens: 586, OutputTokens: 3, TotalTokens: 589},
		Model:        "meta-llama/llama-3.2-3b-instruct:free",
		ID:           "gen-1754667632-NNYO7FUAFP6cwNW8jL7x",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("streamed response (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"test response"}, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	sent := r.requests()
	compareShapes(t, ex[0].body, sent[0].body, nil)
	checkHeaders(t, ex[0], sent[0])

	// 2: the same conversation not streamed, refused with a 429 whose
	// error object has a numeric code.
	req, _ = decodeChatRequest(t, ex[1].body)
	_, err = m.Generate(t.Context(), req)
	var se *model.StatusError
	if !errors.As(err, &se) || !errors.Is(err, model.ErrRateLimited) {
		t.Fatalf("err = %v, want a *model.StatusError matching model.ErrRateLimited", err)
	}
	if se.StatusCode != 429 || se.Code != "429" || se.Provider != "openai" || !strings.HasPrefix(se.Message, "Rate limit exceeded: limit_rpm/") {
		t.Errorf("error %+v", se)
	}
	sent = r.requests()
	compareShapes(t, ex[1].body, sent[1].body, nil)
	checkHeaders(t, ex[1], sent[1])
}

func TestRecordedEmbeddings(t *testing.T) {
	ex := recording(t, "openai", "langchaingo__TestClient_CreateEmbedding.httprr")
	r := replay(t, ex)
	var rec struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.Unmarshal(ex[0].body, &rec); err != nil {
		t.Fatal(err)
	}
	e, err := openai.NewEmbedder(openai.Options{Model: rec.Model, BaseURL: baseOf(t, ex[0].url, "embeddings"),
		APIKey: "test-api-key", HTTPClient: r.client(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(t.Context(), rec.Input)
	if err != nil {
		t.Fatal(err)
	}
	// text-embedding-ada-002 has 1,536 dimensions; the first values as
	// recorded.
	if len(vs) != 1 || len(vs[0]) != 1536 || vs[0][0] != -0.005540426 || vs[0][1] != 0.0047363234 {
		t.Fatalf("%d vectors, the first of %d values starting %v", len(vs), len(vs[0]), vs[0][:2])
	}
	sent := r.requests()[0]
	compareShapes(t, ex[0].body, sent.body, map[string]string{
		"encoding_format": "the adapter asks for floats explicitly (the default), so that no server answers in base64",
	})
	checkHeaders(t, ex[0], sent)
}
