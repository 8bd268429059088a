package gemini

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// fake is a Generative Language API of the test's making: it answers the
// n-th request (from 1) with answer and keeps what it was sent.
type fake struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
	urls   []string
	keys   []string
}

func newFake(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.urls = append(f.urls, r.URL.RequestURI())
		f.keys = append(f.keys, r.Header.Get("X-Goog-Api-Key"))
		n := len(f.bodies)
		f.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) body(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// model returns a model of f, which retries after a millisecond.
func (f *fake) model(t *testing.T, o Options) *Model {
	t.Helper()
	if o.Model == "" {
		o.Model = "gemini-2.5-flash"
	}
	o.APIKey, o.BaseURL = "test-key", f.srv.URL
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.http = transport.New(transport.Options{Provider: provider, MaxRetries: o.MaxRetries, DecodeError: decodeError,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	return m
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		if json.Valid([]byte(e)) {
			e = string(compactJSON(json.RawMessage(e)))
		}
		_, _ = io.WriteString(w, "data: "+e+"\r\n\r\n")
	}
}

const textAnswer = `{"candidates":[{"content":{"parts":[{"text":"Paris."}],"role":"model"},"finishReason":"STOP","index":0}],
"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`

func TestNew(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	t.Setenv("GEMINI_BASE_URL", "")
	if _, err := New(Options{}); !errors.Is(err, model.ErrNoModel) {
		t.Errorf("no model: %v; want model.ErrNoModel", err)
	}
	_, err := New(Options{Model: "gemini-2.5-flash"})
	if !errors.Is(err, model.ErrNoModel) || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("no key: %v; want model.ErrNoModel naming GEMINI_API_KEY", err)
	}
	if _, err := FromEnv("gemini-2.5-flash"); !errors.Is(err, model.ErrNoModel) {
		t.Errorf("FromEnv without a key: %v", err)
	}
	if _, err := New(Options{Model: "m", APIKey: "k", BaseURL: "ftp://x"}); err == nil {
		t.Error("a base URL that is not http(s) was accepted")
	}
	if _, err := New(Options{Model: "m", APIKey: "k", ThinkingBudget: -3}); err == nil {
		t.Error("ThinkingBudget -3 was accepted")
	}

	// The key and base URL from the environment; the key in a header only.
	var gotKey, gotURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotURL = r.Header.Get("X-Goog-Api-Key"), r.URL.RequestURI()
		writeJSON(w, 200, textAnswer)
	}))
	defer srv.Close()
	t.Setenv("GOOGLE_API_KEY", "google-key")
	t.Setenv("GEMINI_BASE_URL", srv.URL+"/")
	m, err := FromEnv("models/gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "gemini:gemini-2.5-flash" {
		t.Errorf("Name() = %q", m.Name())
	}
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if gotKey != "google-key" || gotURL != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("sent key %q to %q; want google-key to /v1beta/models/gemini-2.5-flash:generateContent", gotKey, gotURL)
	}
	t.Setenv("GEMINI_API_KEY", "gemini-key")
	m, _ = New(Options{Model: "tunedModels/my-model", APIVersion: "v1", Headers: map[string]string{"X-Extra": "1"}})
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if gotKey != "gemini-key" || gotURL != "/v1/tunedModels/my-model:generateContent" {
		t.Errorf("sent key %q to %q; GEMINI_API_KEY comes first, tuned models under their name", gotKey, gotURL)
	}
}

func TestLogValueRedactsTheKey(t *testing.T) {
	v := Options{Model: "m", APIKey: "secret"}.LogValue().String()
	if strings.Contains(v, "secret") || !strings.Contains(v, "REDACTED") {
		t.Errorf("LogValue() = %s", v)
	}
}

func encode(t *testing.T, m *Model, req *model.Request) string {
	t.Helper()
	b, err := m.body(req, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func assertJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v: %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the test's JSON: %v", what, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s (-want +got):\n%s\ngot: %s", what, diff, got)
	}
}

func testModel(t *testing.T, o Options) *Model {
	t.Helper()
	o.Model, o.APIKey = "gemini-2.5-flash", "k"
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEncodeConversation(t *testing.T) {
	m := testModel(t, Options{ThinkingBudget: 1024})
	png := []byte("\x89PNG\r\n\x1a\nfake")
	temp := 0.2
	req := &model.Request{
		Messages: []model.Message{
			model.SystemMessage("Be brief."),
			model.SystemMessage("Use tools."),
			{Role: model.RoleUser, Parts: []model.Part{
				model.TextPart("add 2 and 3, then describe these"),
				model.ImagePart("image/png", png),
				model.ImageURLPart("https://example.com/cat.jpg"),
				model.ImageURLPart("data:image/gif;base64,R0lGOD=="),
			}},
			{Role: model.RoleAssistant,
				Parts: []model.Part{
					{Type: model.PartThinking, Text: "I should add.", Signature: "sigT", Provider: "gemini"},
					{Type: model.PartText, Text: "Adding.", Signature: "sigX", Provider: "gemini"},
				},
				ToolCalls: []model.ToolCall{
					{ID: "abc123", Name: "add", Arguments: "{\"a\": 2,\n \"b\": 3}", Signature: "sigC", Provider: "gemini"},
					{ID: "call_0123456789abcdef", Name: "describe", Provider: "gemini"},
				}},
			{Role: model.RoleTool, ToolCallID: "abc123", ToolName: "add", Parts: []model.Part{model.TextPart("5")}},
			{Role: model.RoleTool, ToolCallID: "call_0123456789abcdef", IsError: true,
				Parts: []model.Part{model.TextPart("no camera"), model.ImagePart("image/png", png)}},
			model.UserMessage("thanks; once more"),
			// Another provider's turn: its thinking goes, its signatures too;
			// its call ids go, for the responses to be paired with the calls.
			{Role: model.RoleAssistant,
				Parts:     []model.Part{{Type: model.PartThinking, Text: "hmm", Signature: "s", Provider: "anthropic"}, model.TextPart("ok")},
				ToolCalls: []model.ToolCall{{ID: "call_x", Name: "add", Arguments: `{"a":1,"b":0}`, Signature: "other", Provider: "openai"}}},
			{Role: model.RoleTool, ToolCallID: "call_x", ToolName: "add", Parts: []model.Part{model.TextPart(`{"sum": 1}`)}},
		},
		Tools: []model.ToolDefinition{
			{Name: "add", Description: "Add two integers.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)},
			{Name: "describe", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
		ToolChoice:  "add",
		Temperature: &temp,
		MaxTokens:   100,
		Output: &model.OutputSchema{Name: "answer", Schema: json.RawMessage(
			`{"type":"object","properties":{"sum":{"type":"integer"},"note":{"type":["string","null"]}},"required":["sum"]}`)},
	}
	assertJSON(t, "request", encode(t, m, req), `{
	"systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use tools."}]},
	"contents": [
		{"role": "user", "parts": [
			{"text": "add 2 and 3, then describe these"},
			{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgpmYWtl"}},
			{"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
			{"inlineData": {"mimeType": "image/gif", "data": "R0lGOD=="}}]},
		{"role": "model", "parts": [
			{"text": "I should add.", "thought": true, "thoughtSignature": "sigT"},
			{"text": "Adding.", "thoughtSignature": "sigX"},
			{"functionCall": {"id": "abc123", "name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "sigC"},
			{"functionCall": {"name": "describe", "args": {}}}]},
		{"role": "user", "parts": [
			{"functionResponse": {"id": "abc123", "name": "add", "response": {"result": 5}}},
			{"functionResponse": {"name": "describe", "response": {"error": "no camera"}}},
			{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgpmYWtl"}}]},
		{"role": "user", "parts": [{"text": "thanks; once more"}]},
		{"role": "model", "parts": [{"text": "ok"}, {"functionCall": {"id": "call_x", "name": "add", "args": {"a": 1, "b": 0}}}]},
		{"role": "user", "parts": [{"functionResponse": {"id": "call_x", "name": "add", "response": {"sum": 1}}}]}
	],
	"tools": [{"functionDeclarations": [
		{"name": "add", "description": "Add two integers.", "parameters": {"type": "OBJECT",
			"properties": {"a": {"type": "INTEGER"}, "b": {"type": "INTEGER"}}, "required": ["a", "b"]}},
		{"name": "describe"}]}],
	"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}},
	"generationConfig": {
		"temperature": 0.2, "maxOutputTokens": 100,
		"responseMimeType": "application/json",
		"responseSchema": {"type": "OBJECT", "properties": {"sum": {"type": "INTEGER"}, "note": {"type": "STRING", "nullable": true}},
			"required": ["sum"], "propertyOrdering": ["sum", "note"]},
		"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}}
}`)
}

func TestEncodeOptions(t *testing.T) {
	user := []model.Message{model.UserMessage("hi")}
	tools := []model.ToolDefinition{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
	f := `"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"x":{"type":"STRING"}}}}]}]`
	contents := `"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	for _, tc := range []struct {
		name string
		opts Options
		req  model.Request
		want string
	}{
		{"plain", Options{}, model.Request{Messages: user}, `{` + contents + `}`},
		{"default", Options{}, model.Request{Messages: user, Tools: tools}, `{` + contents + `,` + f + `}`},
		{"auto", Options{}, model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoiceAuto},
			`{` + contents + `,` + f + `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`},
		{"a choice without tools", Options{}, model.Request{Messages: user, ToolChoice: model.ToolChoiceRequired}, `{` + contents + `}`},
		{"none", Options{}, model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoiceNone},
			`{` + contents + `,` + f + `,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
		{"required", Options{}, model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoiceRequired},
			`{` + contents + `,` + f + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`},
		{"JSON without a schema", Options{}, model.Request{Messages: user, Output: &model.OutputSchema{Name: "x"}},
			`{` + contents + `,"generationConfig":{"responseMimeType":"application/json"}}`},
		{"dynamic thinking", Options{ThinkingBudget: ThinkingDynamic}, model.Request{Messages: user},
			`{` + contents + `,"generationConfig":{"thinkingConfig":{"thinkingBudget":-1,"includeThoughts":true}}}`},
		{"no thinking", Options{ThinkingBudget: ThinkingOff}, model.Request{Messages: user},
			`{` + contents + `,"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertJSON(t, "request", encode(t, testModel(t, tc.opts), &tc.req), tc.want)
		})
	}
	m := testModel(t, Options{})
	for _, bad := range []model.Request{
		{Messages: user, Tools: tools, ToolChoice: "g"},
		{Messages: []model.Message{{Role: model.RoleTool, ToolCallID: "x", Parts: []model.Part{model.TextPart("1")}}}},
		{Messages: []model.Message{{Role: "robot", Parts: []model.Part{model.TextPart("1")}}}},
		{Messages: []model.Message{model.SystemMessage("only a system message")}},
		{Messages: user, Tools: []model.ToolDefinition{{Name: "m", Parameters: json.RawMessage(`{"type":"object","additionalProperties":{"type":"integer"}}`)}}},
	} {
		if _, err := m.body(&bad, false); err == nil {
			t.Errorf("%+v was encoded", bad)
		}
	}
}

func TestResponseObject(t *testing.T) {
	for _, tc := range []struct {
		text    string
		isError bool
		want    string
	}{
		{`{"sum": 3}`, false, `{"sum":3}`},
		{`5`, false, `{"result":5}`},
		{`[1, 2]`, false, `{"result":[1,2]}`},
		{`Paris`, false, `{"result":"Paris"}`},
		{``, false, `{"result":""}`},
		{`division by zero`, true, `{"error":"division by zero"}`},
		{`{"code": 7}`, true, `{"error":{"code":7}}`},
	} {
		if got := string(responseObject(tc.text, tc.isError)); got != tc.want {
			t.Errorf("responseObject(%q, %v) = %s, want %s", tc.text, tc.isError, got, tc.want)
		}
	}
	for args, want := range map[string]string{
		``:                `{}`,
		"{\"a\":\n 1}":    `{"a":1}`,
		`[1]`:             `{"arguments":"[1]"}`,
		`{"a":`:           `{"arguments":"{\"a\":"}`,
		` {"b": "x y"} `:  `{"b":"x y"}`,
		`"just a string"`: `{"arguments":"\"just a string\""}`,
	} {
		if got := string(argsObject(args)); got != want {
			t.Errorf("argsObject(%q) = %s, want %s", args, got, want)
		}
	}
}

func TestDecodeResponse(t *testing.T) {
	m := testModel(t, Options{})
	decode := func(t *testing.T, body string) (*model.Response, error) {
		t.Helper()
		var w wireResponse
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatal(err)
		}
		acc := m.newAccumulator(false)
		acc.add(&w, nil)
		return acc.response(false)
	}
	cand := func(parts, finish string) string {
		return `{"candidates":[{"content":{"role":"model","parts":` + parts + `},"finishReason":` + finish + `,"finishMessage":"details",
			"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true},{"category":8,"probability":1}]}],"responseId":"rid"}`
	}
	for _, tc := range []struct {
		name, body string
		finish     model.FinishReason
		err        []error
	}{
		{"stop", cand(`[{"text":"hi"}]`, `"STOP"`), model.FinishStop, nil},
		{"stop as an integer", cand(`[{"text":"hi"}]`, `1`), model.FinishStop, nil},
		{"tool calls", cand(`[{"functionCall":{"name":"f","args":{}}}]`, `"STOP"`), model.FinishToolCalls, nil},
		{"max tokens", cand(`[{"text":"hi"}]`, `"MAX_TOKENS"`), model.FinishLength, nil},
		{"max tokens as an integer", cand(`[{"text":"hi"}]`, `2`), model.FinishLength, nil},
		{"other with content", cand(`[{"text":"hi"}]`, `"OTHER"`), model.FinishOther, nil},
		{"safety", cand(`[]`, `"SAFETY"`), "", []error{ErrBlocked, ErrSafety}},
		{"safety as an integer", cand(`[]`, `3`), "", []error{ErrBlocked, ErrSafety}},
		{"recitation", cand(`[{"text":"It was the best of times"}]`, `"RECITATION"`), "", []error{ErrBlocked, ErrRecitation}},
		{"blocklist", cand(`[]`, `"BLOCKLIST"`), "", []error{ErrBlocked, ErrBlocklist}},
		{"prohibited content", cand(`[]`, `"PROHIBITED_CONTENT"`), "", []error{ErrBlocked, ErrProhibitedContent}},
		{"SPII", cand(`[]`, `"SPII"`), "", []error{ErrBlocked, ErrSPII}},
		{"SPII as an integer", cand(`[]`, `9`), "", []error{ErrBlocked, ErrSPII}},
		{"malformed function call", cand(`[]`, `"MALFORMED_FUNCTION_CALL"`), "", []error{ErrEmptyResponse}},
		{"prompt blocked", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH"}]}}`,
			"", []error{ErrBlocked, ErrSafety}},
		{"prompt blocked as an integer", `{"promptFeedback":{"blockReason":4}}`, "", []error{ErrBlocked, ErrProhibitedContent}},
		{"no candidate", `{"usageMetadata":{"promptTokenCount":3}}`, "", []error{ErrEmptyResponse}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decode(t, tc.body)
			if tc.err == nil {
				if err != nil || r.FinishReason != tc.finish {
					t.Fatalf("finish %v, err %v; want %q", r, err, tc.finish)
				}
				return
			}
			for _, want := range tc.err {
				if !errors.Is(err, want) {
					t.Errorf("err = %v; want it to match %v", err, want)
				}
			}
			var be *BlockedError
			if errors.As(err, &be) {
				if errors.Is(err, ErrRecitation) && tc.name != "recitation" {
					t.Errorf("%v matches ErrRecitation", err)
				}
				if !be.Prompt && (!strings.Contains(err.Error(), "HARM_CATEGORY_DANGEROUS_CONTENT HIGH") || !strings.Contains(err.Error(), "details")) {
					t.Errorf("err = %q; want the blocking rating and the finish message", err)
				}
			}
		})
	}

	// Usage, cached tokens, the model version, the id, and text and
	// thought parts with signatures.
	r, err := decode(t, `{"candidates":[{"content":{"role":"model","parts":[
		{"text":"Let me think","thought":true},
		{"text":"Answer","thoughtSignature":"c2ln"},
		{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
		{"executableCode":{"language":"PYTHON","code":"print(1)"}}]},"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":10,"thoughtsTokenCount":30,"totalTokenCount":140},
		"modelVersion":"gemini-2.5-pro","responseId":"abc"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := &model.Response{
		Message: model.Message{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartThinking, Text: "Let me think", Provider: "gemini"},
			{Type: model.PartText, Text: "Answer", Signature: "c2ln", Provider: "gemini"},
			model.ImagePart("image/png", []byte("\x89PNG\r\n\x1a\n")),
		}},
		FinishReason: model.FinishStop,
		Usage:        model.Usage{Requests: 1, InputTokens: 100, CachedInputTokens: 60, OutputTokens: 40, ReasoningTokens: 30, TotalTokens: 140},
		Model:        "gemini-2.5-pro",
		ID:           "abc",
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// Stable ids: a call without an id gets one made from the response, the
// same each time the response is read, and different for another call.
func TestGeneratedCallIDs(t *testing.T) {
	m := testModel(t, Options{})
	read := func(body string) []model.ToolCall {
		var w wireResponse
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatal(err)
		}
		acc := m.newAccumulator(false)
		acc.add(&w, nil)
		r, err := acc.response(false)
		if err != nil {
			t.Fatal(err)
		}
		return r.Message.ToolCalls
	}
	body := `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}}},{"functionCall":{"name":"f","args":{"a":1}}},
		{"functionCall":{"id":"given","name":"g"}}]},"finishReason":"STOP"}],"responseId":"r1"}`
	a, b := read(body), read(body)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two readings differ:\n%s", diff)
	}
	if a[0].ID == a[1].ID || !generatedID.MatchString(a[0].ID) || a[2].ID != "given" || a[2].Arguments != "{}" {
		t.Errorf("calls %+v; want distinct generated ids, the model's own id kept, {} for no arguments", a)
	}
	if c := read(strings.Replace(body, "r1", "r2", 1)); c[0].ID == a[0].ID {
		t.Errorf("the same call in another response got the same id %q", c[0].ID)
	}
}

// The signature of a function call comes back on the next turn, unchanged,
// on the same functionCall part; the call's id with its response.
func TestSignatureRoundTrip(t *testing.T) {
	const sig = "CssBAb4+9vtA0YNySGDhNbWUekpgT0C4JzfoLAMCUxxSlERp/+=="
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[
				{"text":"Summing.","thought":true},
				{"functionCall":{"id":"fc1","name":"sum","args":{"a":1,"b":2}},"thoughtSignature":"`+sig+`"}]},"finishReason":"STOP"}],
				"usageMetadata":{"promptTokenCount":155,"candidatesTokenCount":18,"thoughtsTokenCount":50,"totalTokenCount":223},"responseId":"x"}`)
			return
		}
		writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"3"}]},"finishReason":"STOP"}]}`)
	})
	m := f.model(t, Options{ThinkingBudget: ThinkingDynamic})
	msgs := []model.Message{model.UserMessage("what is the sum of 1 + 2?")}
	tools := []model.ToolDefinition{{Name: "sum", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`)}}
	first, err := m.Generate(t.Context(), &model.Request{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	c := first.Message.ToolCalls
	if len(c) != 1 || c[0].Signature != sig || c[0].Provider != "gemini" || c[0].ID != "fc1" || first.FinishReason != model.FinishToolCalls {
		t.Fatalf("first response: %+v", first)
	}
	msgs = append(msgs, first.Message, model.Message{Role: model.RoleTool, ToolCallID: "fc1", ToolName: "sum", Parts: []model.Part{model.TextPart(`{"sum":3}`)}})
	if _, err := m.Generate(t.Context(), &model.Request{Messages: msgs, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	var second struct {
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(f.body(1)), &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Contents) != 3 || second.Contents[1].Role != "model" || len(second.Contents[1].Parts) != 2 {
		t.Fatalf("second request: %s", f.body(1))
	}
	assertJSON(t, "the thought part", string(second.Contents[1].Parts[0]), `{"text":"Summing.","thought":true}`)
	assertJSON(t, "the function call part", string(second.Contents[1].Parts[1]),
		`{"functionCall":{"id":"fc1","name":"sum","args":{"a":1,"b":2}},"thoughtSignature":"`+sig+`"}`)
	assertJSON(t, "the function response", string(second.Contents[2].Parts[0]),
		`{"functionResponse":{"id":"fc1","name":"sum","response":{"sum":3}}}`)
	// The same conversation on another provider's model loses the
	// signature and the thought, not the call.
	other := model.ForProvider(msgs, "anthropic")
	if other[1].ToolCalls[0].Signature != "" || len(other[1].Parts) != 0 || other[1].ToolCalls[0].Name != "sum" {
		t.Errorf("ForProvider(anthropic) kept %+v", other[1])
	}
}

func TestStream(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("alt") != "sse" || !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			t.Errorf("streamed to %s", r.URL)
		}
		writeSSE(w,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"**Plan**","thought":true}]}}],"usageMetadata":{"promptTokenCount":5,"thoughtsTokenCount":20,"totalTokenCount":25},"responseId":"s1","modelVersion":"gemini-3-pro"}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"}]}}],"responseId":"s1"}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":", world"}]}}],"responseId":"s1"}`,
			// The signature of the text, alone in the last chunk.
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"U0lH"},{"functionCall":{"name":"f","args":{"q":"x"}},"thoughtSignature":"Rg=="}]},"finishReason":"STOP"}],
			  "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"thoughtsTokenCount":20,"totalTokenCount":29},"responseId":"s1"}`)
	})
	m := f.model(t, Options{ThinkingBudget: 512})
	var deltas []model.Delta
	var resp *model.Response
	for c, err := range m.GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Delta != nil {
			deltas = append(deltas, *c.Delta)
		}
		if c.Response != nil {
			resp = c.Response
		}
	}
	if resp == nil {
		t.Fatal("no response")
	}
	id := resp.Message.ToolCalls[0].ID
	wantDeltas := []model.Delta{{Thinking: "**Plan**"}, {Text: "Hello"}, {Text: ", world"},
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: id, Name: "f", Arguments: `{"q":"x"}`}}}
	if diff := cmp.Diff(wantDeltas, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	want := &model.Response{
		Message: model.Message{Role: model.RoleAssistant,
			Parts: []model.Part{
				{Type: model.PartThinking, Text: "**Plan**", Provider: "gemini"},
				{Type: model.PartText, Text: "Hello, world", Signature: "U0lH", Provider: "gemini"},
			},
			ToolCalls: []model.ToolCall{{ID: id, Name: "f", Arguments: `{"q":"x"}`, Signature: "Rg==", Provider: "gemini"}}},
		FinishReason: model.FinishToolCalls,
		Usage:        model.Usage{Requests: 1, InputTokens: 5, OutputTokens: 24, ReasoningTokens: 20, TotalTokens: 29},
		Model:        "gemini-3-pro",
		ID:           "s1",
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	assertJSON(t, "thinking config", f.body(0), `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
		"generationConfig":{"thinkingConfig":{"thinkingBudget":512,"includeThoughts":true}}}`)
}

func TestStreamStopsEarly(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`, `{"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}]}`)
	})
	m := f.model(t, Options{})
	n := 0
	for range m.GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d chunks after the consumer stopped", n)
	}
}

// Faults of the HTTP layer and of streams, on fakes.
func TestFaults(t *testing.T) {
	hi := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
	generate := func(m *Model) (*model.Response, error) { return m.Generate(t.Context(), hi) }
	stream := func(m *Model) (*model.Response, error) {
		var resp *model.Response
		for c, err := range m.GenerateStream(t.Context(), hi) {
			if err != nil {
				return nil, err
			}
			resp = c.Response
		}
		return resp, nil
	}
	for _, tc := range []struct {
		name     string
		answer   func(n int, w http.ResponseWriter)
		call     func(*Model) (*model.Response, error)
		wantN    int
		wantErr  []error
		wantText string
	}{
		{"429 with Retry-After then success", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "0.01")
				writeJSON(w, 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
				return
			}
			writeJSON(w, 200, textAnswer)
		}, generate, 2, nil, "Paris."},
		{"429 with a retry delay in its details then success", func(n int, w http.ResponseWriter) {
			if n == 1 {
				writeJSON(w, 429, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[
					{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.01s"}]}}`)
				return
			}
			writeJSON(w, 200, textAnswer)
		}, generate, 2, nil, "Paris."},
		{"500 twice then success", func(n int, w http.ResponseWriter) {
			if n <= 2 {
				writeJSON(w, 500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`)
				return
			}
			writeJSON(w, 200, textAnswer)
		}, generate, 3, nil, "Paris."},
		{"503 on a stream then success", func(n int, w http.ResponseWriter) {
			if n == 1 {
				writeJSON(w, 503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)
				return
			}
			writeSSE(w, textAnswer)
		}, stream, 2, nil, "Paris."},
		{"400 context too long", func(n int, w http.ResponseWriter) {
			writeJSON(w, 400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`)
		}, generate, 1, []error{model.ErrContextTooLong, model.ErrInvalidRequest}, ""},
		{"401", func(n int, w http.ResponseWriter) {
			writeJSON(w, 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
		}, generate, 1, []error{model.ErrAuthentication}, ""},
		{"400 for an invalid key", func(n int, w http.ResponseWriter) {
			writeJSON(w, 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",
				"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`)
		}, generate, 1, []error{model.ErrAuthentication, model.ErrInvalidRequest}, ""},
		{"a stream cut in the middle", func(n int, w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`)
			_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":" capi`)
		}, stream, 1, []error{io.ErrUnexpectedEOF}, ""},
		{"a stream ended between events without its last chunk", func(n int, w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`)
		}, stream, 1, []error{io.ErrUnexpectedEOF}, ""},
		{"an empty stream", func(n int, w http.ResponseWriter) { writeSSE(w) }, stream, 1, []error{io.ErrUnexpectedEOF}, ""},
		{"an error in the stream", func(n int, w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`,
				`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
		}, stream, 1, []error{model.ErrOverloaded}, ""},
		{"a blocked stream", func(n int, w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`, `{"candidates":[{"finishReason":"SAFETY"}]}`)
		}, stream, 1, []error{ErrSafety}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) { tc.answer(n, w) })
			resp, err := tc.call(f.model(t, Options{}))
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err = %v; want it to match %v", err, want)
				}
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Text() != tc.wantText {
					t.Errorf("text %q; want %q", resp.Message.Text(), tc.wantText)
				}
			} else if resp != nil {
				t.Errorf("a response %+v with the error", resp)
			}
			if f.count() != tc.wantN {
				t.Errorf("%d requests; want %d", f.count(), tc.wantN)
			}
			var se *model.StatusError
			if errors.As(err, &se) && (se.Provider != "gemini" || se.Message == "" || se.StatusCode == 0) {
				t.Errorf("status error %+v; want the provider, the status and the message", se)
			}
		})
	}
}

func TestMalformedEvent(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeSSE(w, `{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`, `{"candidates": [nope`)
	})
	var err error
	var texts []string
	for c, e := range f.model(t, Options{}).GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		if e != nil {
			err = e
			break
		}
		if c.Response != nil {
			t.Fatal("a response after a malformed event")
		}
		texts = append(texts, c.Delta.Text)
	}
	if err == nil || !strings.Contains(err.Error(), "malformed stream event") || len(texts) != 1 {
		t.Errorf("err = %v after %q; want a malformed-event error after the first delta", err, texts)
	}
}

func TestTimeout(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+`{"candidates":[{"content":{"parts":[{"text":"The"}]}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	m := f.model(t, Options{})
	m.http = transport.New(transport.Options{Provider: provider, Timeout: 50 * time.Millisecond})
	var err error
	for _, e := range m.GenerateStream(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}) {
		if e != nil {
			err = e
		}
	}
	if !errors.Is(err, model.ErrTimeout) {
		t.Errorf("err = %v; want model.ErrTimeout", err)
	}
}

// Gemini before 3 refuses an output schema with function declarations:
// the request goes again with the schema in the system instruction, and
// later requests put it there at once.
func TestOutputWithToolsFallsBackToInstruction(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, 400, `{"error":{"code":400,"message":"Function calling with a response mime type: 'application/json' is unsupported","status":"INVALID_ARGUMENT"}}`)
			return
		}
		writeJSON(w, 200, `{"candidates":[{"content":{"parts":[{"text":"`+"```json\\n{\\\"sum\\\": 5}\\n```"+`"}]},"finishReason":"STOP"}]}`)
	})
	m := f.model(t, Options{})
	req := &model.Request{
		Messages: []model.Message{model.SystemMessage("Add."), model.UserMessage("2+3")},
		Tools:    []model.ToolDefinition{{Name: "add", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}},
		Output:   &model.OutputSchema{Name: "out", Schema: json.RawMessage(`{"type":"object","properties":{"sum":{"type":"integer"}}}`)},
	}
	for range 2 {
		resp, err := m.Generate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Message.Text(); got != `{"sum": 5}` {
			t.Errorf("text %q; want the JSON without its fence", got)
		}
	}
	if f.count() != 3 {
		t.Fatalf("%d requests; want 3 (refused, again, then at once)", f.count())
	}
	if !strings.Contains(f.body(0), `"responseMimeType":"application/json"`) {
		t.Errorf("first request without the response type: %s", f.body(0))
	}
	for _, i := range []int{1, 2} {
		b := f.body(i)
		if strings.Contains(b, "responseMimeType") || !strings.Contains(b, `{\"type\":\"object\",\"properties\":{\"sum\":{\"type\":\"integer\"}}}`) {
			t.Errorf("request %d: %s; want the schema in the system instruction", i+1, b)
		}
	}
	// Without tools the schema still goes in the generation config.
	if b := encode(t, m, &model.Request{Messages: req.Messages, Output: req.Output}); !strings.Contains(b, "responseSchema") {
		t.Errorf("without tools: %s", b)
	}
}

func TestEmbedder(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"embeddings":[{"values":[0.1,0.2]},{"values":[0.3,0.4]}]}`)
	})
	e, err := NewEmbedder(Options{Model: "gemini-embedding-001", APIKey: "test-key", BaseURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "gemini:gemini-embedding-001" {
		t.Errorf("Name() = %q", e.Name())
	}
	vecs, err := e.Embed(t.Context(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]float32{{0.1, 0.2}, {0.3, 0.4}}, vecs); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	assertJSON(t, "request", f.body(0), `{"requests":[
		{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]}},
		{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]}}]}`)
	if f.urls[0] != "/v1beta/models/gemini-embedding-001:batchEmbedContents" || f.keys[0] != "test-key" {
		t.Errorf("sent to %s with key %q", f.urls[0], f.keys[0])
	}
	if _, err := e.Embed(t.Context(), []string{"only one"}); err == nil {
		t.Error("two vectors for one text were accepted")
	}
}
