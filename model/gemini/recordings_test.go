package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/internal/transport"
)

// The recorded traffic of the shared set (shared/recordings/gemini, next
// to the repository): every file there is replayed by TestRecordings, one
// exchange after the other, as one conversation.
//
// For each exchange the test (a) builds the neutral request of the same
// conversation (user turns and tool results read from the recorded
// request, model turns taken from this adapter's own reading of the
// earlier responses, so that thought signatures and call ids travel as
// the adapter keeps them), (b) compares the request the adapter sends
// with the recorded one field by field, and (c) serves the recorded
// response and checks what the adapter reads from it against the
// recorded JSON: text, thinking, tool calls with their ids, arguments and
// signatures, text signatures, usage, finish reason, model version,
// response id, streamed deltas, and errors.
//
// Files, and what they cover:
//
//   - adk-go__TestNewGeminiModel: generateContent, then the same prompt
//     streamed (alt=sse).
//   - adk-go__TestFunctionTool: a function call with a thoughtSignature,
//     then its functionResponse turn carrying the signature back.
//   - adk-go__TestLLMAgentStreamingModeSSE: thought summaries streamed
//     (includeThoughts), thinking tokens.
//   - adk-go__TestParallelFunctionCalls_...: three function calls in one
//     streamed event, their responses in one user content, two rounds.
//   - adk-go__TestDelegation_01_ChatToTaskToTool,
//     adk-go__TestDelegation_04_ChatToTwoSingleTurnParallel: function-call
//     ids sent back on the call and its response, signatures on text
//     parts, parallel calls, non-ASCII text, enums in parameters.
//   - langchaingo__TestGoogleAIGenerateContent, ...WithTools,
//     ...MultiModalContent, ...WithJSONMode: integer enums (finishReason
//     1), a function call, an inline PNG, responseMimeType.
//   - langchaingo__TestGoogleAIWithStreaming,
//     ...GenerateContentWithSystemMessage, ...ToolCallResponse: their
//     streamGenerateContent answers are one JSON array (the
//     "$alt=json;enum-encoding=int" dialect this adapter does not ask for);
//     the replay serves the same chunks, unchanged, as the server-sent
//     events of alt=sse, so the chunks' shapes are covered, not that
//     framing.
//   - langchaingo__TestGoogleAIErrorHandling: a 403 PERMISSION_DENIED
//     error (model.ErrAuthentication).
//   - langchaingo__TestGoogleAICreateEmbedding: batchEmbedContents, read
//     by the Embedder.
//
// What the comparison leaves out, as other clients' choices: langchaingo's
// "model" field in the body, its safetySettings and its candidateCount,
// topP and topK; the role of systemInstruction ("user" for adk-go,
// "system" for langchaingo; this adapter sends none); adk-go's
// parametersJsonSchema and responseJsonSchema (this adapter sends its own
// translation as parameters, compared with wantParameters); and
// thinkingBudget (ThinkingDynamic sends -1, adk-go sent includeThoughts
// alone).

// recordingsDir returns the shared Gemini recordings, or skips the test
// when they are absent (a clone without the shared folder beside it).
func recordingsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "recordings", "gemini")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no recordings at %s: %v", dir, err)
	}
	return dir
}

// exchange is one recorded request and its response.
type exchange struct {
	method, path string
	query        string
	reqBody      []byte
	status       int
	respHeader   http.Header
	respBody     []byte
}

// readRecording reads the exchanges of an httprr trace.
func readRecording(t *testing.T, path string) []exchange {
	t.Helper()
	xs, err := cassette.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]exchange, len(xs))
	for i, x := range xs {
		out[i] = exchange{
			method: x.Request.Method, path: x.Request.URL.Path, query: x.Request.URL.RawQuery, reqBody: x.RequestBody,
			status: x.Response.StatusCode, respHeader: x.Response.Header, respBody: x.ResponseBody,
		}
	}
	return out
}

func (e exchange) streamed() bool { return strings.HasSuffix(e.path, ":streamGenerateContent") }

// chunks returns the response chunks of e: its one JSON object, or the
// events of a stream (server-sent events, or langchaingo's JSON array).
func (e exchange) chunks(t *testing.T) []json.RawMessage {
	t.Helper()
	body := bytes.TrimSpace(e.respBody)
	if !e.streamed() {
		return []json.RawMessage{body}
	}
	if bytes.HasPrefix(body, []byte("[")) {
		var list []json.RawMessage
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		return list
	}
	var out []json.RawMessage
	r := transport.NewSSEReader(bytes.NewReader(e.respBody))
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, json.RawMessage(ev.Data))
	}
}

// sent is a request the adapter sent to the replay server.
type sent struct {
	method, path string
	query        map[string][]string
	header       http.Header
	body         []byte
}

// replay serves recorded exchanges in order and keeps what it was sent.
type replay struct {
	t    *testing.T
	ex   []exchange
	mu   sync.Mutex
	next int
	got  []sent
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rp.mu.Lock()
	i := rp.next
	rp.next++
	rp.got = append(rp.got, sent{method: r.Method, path: r.URL.Path, query: r.URL.Query(), header: r.Header.Clone(), body: body})
	rp.mu.Unlock()
	if i >= len(rp.ex) {
		rp.t.Errorf("request %d: the recording has only %d exchanges", i+1, len(rp.ex))
		http.Error(w, "no more exchanges", http.StatusInternalServerError)
		return
	}
	e := rp.ex[i]
	if r.Method != e.method || r.URL.Path != e.path {
		rp.t.Errorf("request %d: %s %s; recorded %s %s", i+1, r.Method, r.URL.Path, e.method, e.path)
	}
	w.Header().Set("Content-Type", e.respHeader.Get("Content-Type"))
	respBody := e.respBody
	if e.streamed() && e.status == http.StatusOK && bytes.HasPrefix(bytes.TrimSpace(respBody), []byte("[")) {
		// langchaingo's JSON array of chunks, served as alt=sse events.
		var b bytes.Buffer
		for _, c := range e.chunks(rp.t) {
			b.WriteString("data: ")
			b.Write(compactJSON(c))
			b.WriteString("\r\n\r\n")
		}
		respBody = b.Bytes()
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(respBody)
}

// wantParameters are the translations expected for the tools whose
// recorded request gives JSON Schema (adk-go's parametersJsonSchema)
// rather than Gemini's schema.
var wantParameters = map[string]string{
	"sum":          `{"type":"OBJECT","properties":{"a":{"type":"INTEGER"},"b":{"type":"INTEGER"}},"required":["a","b"]}`,
	"store_report": `{"type":"OBJECT","properties":{"items":{"type":"ARRAY","nullable":true,"items":{"type":"STRING"}}},"required":["items"]}`,
}

func TestRecordings(t *testing.T) {
	dir := recordingsDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.httprr"))
	if err != nil || len(files) == 0 {
		t.Skipf("no recordings in %s", dir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".httprr"), func(t *testing.T) {
			replayFile(t, f)
		})
	}
}

// replayFile replays the conversation of one recording.
func replayFile(t *testing.T, file string) {
	ex := readRecording(t, file)
	if len(ex) == 0 {
		t.Skip("the recording has no exchange")
	}
	rp := &replay{t: t, ex: ex}
	srv := httptest.NewServer(rp)
	defer srv.Close()
	modelName := func(p string) string {
		name := p[strings.LastIndex(p, "/")+1:]
		return name[:strings.LastIndex(name, ":")]
	}
	if strings.HasSuffix(ex[0].path, ":batchEmbedContents") {
		replayEmbeddings(t, srv.URL, modelName(ex[0].path), ex, rp)
		return
	}
	var earlier []*model.Message
	for i, e := range ex {
		var body map[string]any
		if err := json.Unmarshal(e.reqBody, &body); err != nil {
			t.Fatalf("exchange %d: recorded request: %v", i+1, err)
		}
		thinking := 0
		if v, _ := dig(body, "generationConfig", "thinkingConfig", "includeThoughts").(bool); v {
			thinking = ThinkingDynamic
		}
		m, err := New(Options{Model: modelName(e.path), APIKey: "test-key", BaseURL: srv.URL, MaxRetries: -1, ThinkingBudget: thinking})
		if err != nil {
			t.Fatal(err)
		}
		req := conversation(t, e.reqBody, earlier)
		var resp *model.Response
		var deltas []model.Delta
		if e.streamed() {
			for c, err := range m.GenerateStream(t.Context(), req) {
				if err != nil {
					resp, deltas = nil, append(deltas, model.Delta{Text: "ERROR: " + err.Error()})
					break
				}
				if c.Delta != nil {
					deltas = append(deltas, *c.Delta)
				}
				resp = c.Response
			}
		} else {
			resp, err = m.Generate(t.Context(), req)
			if e.status != http.StatusOK {
				checkRecordedError(t, i, e, err)
				resp = nil
			} else if err != nil {
				t.Fatalf("exchange %d: %v", i+1, err)
			}
		}
		compareRequest(t, i, rp.got[i], e, body)
		if e.status != http.StatusOK {
			continue
		}
		if resp == nil {
			t.Fatalf("exchange %d: no response; deltas %v", i+1, deltas)
		}
		checkResponse(t, i, e, resp, deltas)
		msg := resp.Message
		earlier = append(earlier, &msg)
	}
}

// conversation rebuilds, from a recorded request body, the neutral
// request of the same conversation. Model turns are this adapter's
// readings of earlier responses: the one whose encoding matches the
// recorded turn (which the other client built from the same response).
func conversation(t *testing.T, raw []byte, earlier []*model.Message) *model.Request {
	t.Helper()
	var w struct {
		Contents          []wireContent `json:"contents"`
		SystemInstruction *wireContent  `json:"systemInstruction"`
		Tools             []struct {
			FunctionDeclarations []map[string]json.RawMessage `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			Temperature      *float64 `json:"temperature"`
			MaxOutputTokens  int      `json:"maxOutputTokens"`
			ResponseMIMEType string   `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	req := &model.Request{Temperature: w.GenerationConfig.Temperature, MaxTokens: w.GenerationConfig.MaxOutputTokens}
	if w.GenerationConfig.ResponseMIMEType == "application/json" {
		req.Output = &model.OutputSchema{Name: "output"}
	}
	if w.SystemInstruction != nil {
		for _, p := range w.SystemInstruction.Parts {
			req.Messages = append(req.Messages, model.SystemMessage(p.Text))
		}
	}
	var last *model.Message // the latest model turn
	for ci, c := range w.Contents {
		if c.Role == "model" {
			want, _ := json.Marshal(c.Parts)
			var found *model.Message
			for _, m := range earlier {
				parts, err := modelParts(*m, 0, map[string]callInfo{})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := json.Marshal(parts)
				if jsonEqual(got, want) {
					found = m
					break
				}
			}
			if found == nil {
				t.Fatalf("content %d: no earlier response reads as the recorded model turn %s", ci, want)
			}
			req.Messages = append(req.Messages, *found)
			last = found
			continue
		}
		user := model.Message{Role: model.RoleUser}
		used := map[int]bool{}
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				id := fr.ID
				if id == "" && last != nil {
					for k, call := range last.ToolCalls {
						if call.Name == fr.Name && !used[k] {
							id, used[k] = call.ID, true
							break
						}
					}
				}
				req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, ToolCallID: id, ToolName: fr.Name,
					Parts: []model.Part{model.TextPart(string(fr.Response))}})
			case p.InlineData != nil:
				data, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
				if err != nil {
					t.Fatal(err)
				}
				user.Parts = append(user.Parts, model.ImagePart(p.InlineData.MIMEType, data))
			case p.Text != "":
				user.Parts = append(user.Parts, model.TextPart(p.Text))
			}
		}
		if len(user.Parts) > 0 {
			req.Messages = append(req.Messages, user)
		}
	}
	for _, tl := range w.Tools {
		for _, d := range tl.FunctionDeclarations {
			var name, desc string
			_ = json.Unmarshal(d["name"], &name)
			_ = json.Unmarshal(d["description"], &desc)
			params := d["parametersJsonSchema"]
			if params == nil && d["parameters"] != nil {
				params = toJSONSchema(t, d["parameters"])
			}
			req.Tools = append(req.Tools, model.ToolDefinition{Name: name, Description: desc, Parameters: params})
		}
	}
	return req
}

// schemaTypes are the names of Gemini's types by number.
var schemaTypes = []string{"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}

// toJSONSchema turns a recorded Gemini schema (types by name or number)
// into the JSON Schema a tool would give.
func toJSONSchema(t *testing.T, raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(mapTypes(v, strings.ToLower))
	return b
}

// mapTypes returns the schema v with its type names (or numbers) passed
// through f.
func mapTypes(v any, f func(string) string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, sub := range v {
			switch k {
			case "type":
				switch ty := sub.(type) {
				case string:
					out[k] = f(ty)
				case float64:
					out[k] = f(schemaTypes[int(ty)])
				}
			case "properties":
				props := map[string]any{}
				for name, p := range sub.(map[string]any) {
					props[name] = mapTypes(p, f)
				}
				out[k] = props
			case "items":
				out[k] = mapTypes(sub, f)
			case "anyOf":
				var list []any
				for _, s := range sub.([]any) {
					list = append(list, mapTypes(s, f))
				}
				out[k] = list
			default:
				out[k] = sub
			}
		}
		return out
	}
	return v
}

// compareRequest compares the request the adapter sent with the recorded
// one, field by field.
func compareRequest(t *testing.T, i int, got sent, want exchange, wantBody map[string]any) {
	t.Helper()
	if got.method != want.method || got.path != want.path {
		t.Errorf("exchange %d: %s %s; recorded %s %s", i+1, got.method, got.path, want.method, want.path)
	}
	if want.streamed() && (len(got.query["alt"]) != 1 || got.query["alt"][0] != "sse") {
		t.Errorf("exchange %d: streamed without alt=sse: %v", i+1, got.query)
	}
	if _, ok := got.query["key"]; ok {
		t.Errorf("exchange %d: the API key is in the URL", i+1)
	}
	if k := got.header.Get("X-Goog-Api-Key"); k != "test-key" {
		t.Errorf("exchange %d: x-goog-api-key %q", i+1, k)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("exchange %d: Content-Type %q", i+1, ct)
	}
	var gotBody map[string]any
	if err := json.Unmarshal(got.body, &gotBody); err != nil {
		t.Fatalf("exchange %d: sent body: %v", i+1, err)
	}
	for k := range gotBody {
		switch k {
		case "contents", "systemInstruction", "tools", "toolConfig", "generationConfig":
		default:
			t.Errorf("exchange %d: unexpected field %q", i+1, k)
		}
	}
	if diff := cmp.Diff(wantBody["contents"], gotBody["contents"]); diff != "" {
		t.Errorf("exchange %d: contents (-recorded +sent):\n%s", i+1, diff)
	}
	if diff := cmp.Diff(dig(wantBody, "systemInstruction", "parts"), dig(gotBody, "systemInstruction", "parts")); diff != "" {
		t.Errorf("exchange %d: systemInstruction parts (-recorded +sent):\n%s", i+1, diff)
	}
	wantDecls, _ := dig(wantBody, "tools", 0, "functionDeclarations").([]any)
	gotDecls, _ := dig(gotBody, "tools", 0, "functionDeclarations").([]any)
	if len(gotDecls) != len(wantDecls) {
		t.Errorf("exchange %d: %d function declarations; recorded %d", i+1, len(gotDecls), len(wantDecls))
	}
	for k := range min(len(gotDecls), len(wantDecls)) {
		g, w := gotDecls[k].(map[string]any), wantDecls[k].(map[string]any)
		if g["name"] != w["name"] || g["description"] != w["description"] {
			t.Errorf("exchange %d: declaration %d: %v %q; recorded %v %q", i+1, k, g["name"], g["description"], w["name"], w["description"])
		}
		var wantParams any
		if p, ok := w["parameters"]; ok {
			wantParams = mapTypes(p, func(s string) string { return s })
		} else if s, ok := wantParameters[w["name"].(string)]; ok {
			_ = json.Unmarshal([]byte(s), &wantParams)
		} else if p, ok := w["parametersJsonSchema"]; ok {
			raw, _ := json.Marshal(p)
			tr, err := translateSchema(raw, false)
			if err != nil {
				t.Errorf("exchange %d: declaration %v: %v", i+1, w["name"], err)
			}
			_ = json.Unmarshal(tr, &wantParams)
			t.Logf("exchange %d: declaration %v: no expected translation listed; compared with the adapter's own", i+1, w["name"])
		}
		if diff := cmp.Diff(wantParams, g["parameters"]); diff != "" {
			t.Errorf("exchange %d: declaration %v parameters (-want +sent):\n%s", i+1, w["name"], diff)
		}
	}
	for _, k := range []string{"temperature", "maxOutputTokens", "responseMimeType"} {
		if w, g := dig(wantBody, "generationConfig", k), dig(gotBody, "generationConfig", k); w != g {
			t.Errorf("exchange %d: generationConfig.%s %v; recorded %v", i+1, k, g, w)
		}
	}
	if w, g := dig(wantBody, "generationConfig", "thinkingConfig", "includeThoughts"), dig(gotBody, "generationConfig", "thinkingConfig", "includeThoughts"); w != g {
		t.Errorf("exchange %d: includeThoughts %v; recorded %v", i+1, g, w)
	}
}

// dig returns the value at the path of keys (strings) and indexes (ints)
// in v, or nil.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
}

// recorded is what a recorded response says, read straight from its JSON.
type recorded struct {
	text, thinking string
	textSignatures []string
	calls          []model.ToolCall // IDs empty when the model gave none
	finish         string
	usage          model.Usage
	version, id    string
}

func readRecorded(t *testing.T, e exchange) recorded {
	t.Helper()
	var r recorded
	for _, c := range e.chunks(t) {
		var w struct {
			Candidates []struct {
				Content struct {
					Parts []wirePart `json:"parts"`
				} `json:"content"`
				FinishReason enum `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata *wireUsage `json:"usageMetadata"`
			ModelVersion  string     `json:"modelVersion"`
			ResponseID    string     `json:"responseId"`
		}
		if err := json.Unmarshal(c, &w); err != nil {
			t.Fatal(err)
		}
		if r.id == "" {
			r.id = w.ResponseID
		}
		r.version = w.ModelVersion
		if u := w.UsageMetadata; u != nil {
			r.usage = model.Usage{Requests: 1, InputTokens: u.PromptTokenCount, CachedInputTokens: u.CachedContentTokenCount,
				OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount, ReasoningTokens: u.ThoughtsTokenCount, TotalTokens: u.TotalTokenCount}
		}
		for _, cand := range w.Candidates {
			if cand.FinishReason != "" {
				r.finish = cand.FinishReason.name(finishReasons)
			}
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					r.calls = append(r.calls, model.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name,
						Arguments: string(compactJSON(p.FunctionCall.Args)), Signature: p.ThoughtSignature, Provider: "gemini"})
				case p.Thought:
					r.thinking += p.Text
				default:
					r.text += p.Text
					if p.ThoughtSignature != "" {
						r.textSignatures = append(r.textSignatures, p.ThoughtSignature)
					}
				}
			}
		}
	}
	return r
}

// checkResponse checks what the adapter read from exchange i against the
// recorded response.
func checkResponse(t *testing.T, i int, e exchange, resp *model.Response, deltas []model.Delta) {
	t.Helper()
	want := readRecorded(t, e)
	var thinking string
	var sigs []string
	for _, p := range resp.Message.Parts {
		switch p.Type {
		case model.PartThinking:
			thinking += p.Text
			if p.Provider != "gemini" {
				t.Errorf("exchange %d: thinking part of provider %q", i+1, p.Provider)
			}
		case model.PartText:
			if p.Signature != "" {
				sigs = append(sigs, p.Signature)
				if p.Provider != "gemini" {
					t.Errorf("exchange %d: signed text part of provider %q", i+1, p.Provider)
				}
			}
		}
	}
	if got := resp.Message.Text(); got != want.text {
		t.Errorf("exchange %d: text %q; recorded %q", i+1, got, want.text)
	}
	if thinking != want.thinking {
		t.Errorf("exchange %d: thinking %q; recorded %q", i+1, thinking, want.thinking)
	}
	if diff := cmp.Diff(want.textSignatures, sigs); diff != "" {
		t.Errorf("exchange %d: text signatures (-recorded +read):\n%s", i+1, diff)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != len(want.calls) {
		t.Fatalf("exchange %d: %d tool calls; recorded %d", i+1, len(calls), len(want.calls))
	}
	for k, c := range calls {
		w := want.calls[k]
		if w.ID == "" {
			if !generatedID.MatchString(c.ID) {
				t.Errorf("exchange %d: call %d: generated id %q", i+1, k, c.ID)
			}
			w.ID = c.ID
		}
		if diff := cmp.Diff(w, c); diff != "" {
			t.Errorf("exchange %d: call %d (-recorded +read):\n%s", i+1, k, diff)
		}
	}
	wantFinish := model.FinishStop
	switch {
	case want.finish == "MAX_TOKENS":
		wantFinish = model.FinishLength
	case len(want.calls) > 0:
		wantFinish = model.FinishToolCalls
	}
	if resp.FinishReason != wantFinish {
		t.Errorf("exchange %d: finish %q; recorded %s", i+1, resp.FinishReason, want.finish)
	}
	if diff := cmp.Diff(want.usage, resp.Usage); diff != "" {
		t.Errorf("exchange %d: usage (-recorded +read):\n%s", i+1, diff)
	}
	if resp.Model != want.version || resp.ID != want.id {
		t.Errorf("exchange %d: model %q id %q; recorded %q %q", i+1, resp.Model, resp.ID, want.version, want.id)
	}
	if !e.streamed() {
		return
	}
	var text, think string
	var calld []model.ToolCall
	for _, d := range deltas {
		text += d.Text
		think += d.Thinking
		if tc := d.ToolCall; tc != nil {
			if tc.Index != len(calld) {
				t.Errorf("exchange %d: tool-call delta index %d; want %d", i+1, tc.Index, len(calld))
			}
			calld = append(calld, model.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
	}
	if text != want.text || think != want.thinking {
		t.Errorf("exchange %d: deltas give text %q thinking %q; recorded %q %q", i+1, text, think, want.text, want.thinking)
	}
	for k, c := range calls {
		if k >= len(calld) || calld[k] != (model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}) {
			t.Errorf("exchange %d: tool-call deltas %+v; want each call whole: %+v", i+1, calld, calls)
			break
		}
	}
}

// checkRecordedError checks the error the adapter returned for a recorded
// error response.
func checkRecordedError(t *testing.T, i int, e exchange, err error) {
	t.Helper()
	var se *model.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("exchange %d: err = %v; want a *model.StatusError", i+1, err)
	}
	var w struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(e.respBody, &w); err != nil {
		t.Fatal(err)
	}
	want := model.StatusError{Provider: "gemini", StatusCode: e.status, Type: w.Error.Status, Code: strconv.Itoa(w.Error.Code), Message: w.Error.Message}
	if diff := cmp.Diff(want, *se); diff != "" {
		t.Errorf("exchange %d: error (-recorded +read):\n%s", i+1, diff)
	}
	if e.status == http.StatusForbidden && !errors.Is(err, model.ErrAuthentication) {
		t.Errorf("exchange %d: a 403 does not match model.ErrAuthentication: %v", i+1, err)
	}
}

// replayEmbeddings replays a batchEmbedContents recording through the
// Embedder.
func replayEmbeddings(t *testing.T, base, name string, ex []exchange, rp *replay) {
	e, err := NewEmbedder(Options{Model: name, APIKey: "test-key", BaseURL: base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ex {
		var body struct {
			Requests []struct {
				Model   string      `json:"model"`
				Content wireContent `json:"content"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(x.reqBody, &body); err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, r := range body.Requests {
			texts = append(texts, r.Content.Parts[0].Text)
		}
		vecs, err := e.Embed(t.Context(), texts)
		if err != nil {
			t.Fatalf("exchange %d: %v", i+1, err)
		}
		var want wireEmbedResponse
		if err := json.Unmarshal(x.respBody, &want); err != nil {
			t.Fatal(err)
		}
		if len(vecs) != len(want.Embeddings) {
			t.Fatalf("exchange %d: %d vectors; recorded %d", i+1, len(vecs), len(want.Embeddings))
		}
		for k := range vecs {
			if !cmp.Equal(vecs[k], want.Embeddings[k].Values) || len(vecs[k]) == 0 {
				t.Errorf("exchange %d: vector %d differs from the recorded one", i+1, k)
			}
		}
		got := rp.got[i]
		if got.path != x.path || got.header.Get("X-Goog-Api-Key") != "test-key" {
			t.Errorf("exchange %d: sent %s with key %q; recorded %s", i+1, got.path, got.header.Get("X-Goog-Api-Key"), x.path)
		}
		var sentBody, recBody map[string]any
		_ = json.Unmarshal(got.body, &sentBody)
		_ = json.Unmarshal(x.reqBody, &recBody)
		reqs, _ := sentBody["requests"].([]any)
		if len(reqs) != len(body.Requests) {
			t.Fatalf("exchange %d: %d requests; recorded %d", i+1, len(reqs), len(body.Requests))
		}
		for k := range reqs {
			for _, key := range [][]any{{"model"}, {"content", "parts"}} {
				if diff := cmp.Diff(dig(recBody, append([]any{"requests", k}, key...)...), dig(reqs[k], key...)); diff != "" {
					t.Errorf("exchange %d: request %d %v (-recorded +sent):\n%s", i+1, k, key, diff)
				}
			}
		}
	}
}

// A conversation built by hand, its calls with no provider, sends the
// call ids back as the recorded clients did: every functionCall and
// functionResponse id of the recorded requests is in the request this
// package makes of the same conversation.
func TestRecordedIDsOfHandBuiltConversation(t *testing.T) {
	dir := recordingsDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.httprr"))
	checked := 0
	for _, file := range files {
		for i, e := range readRecording(t, file) {
			var w struct {
				Contents []wireContent `json:"contents"`
			}
			if json.Unmarshal(e.reqBody, &w) != nil {
				continue
			}
			var msgs []model.Message
			var want []string
			for _, c := range w.Contents {
				if c.Role == "model" {
					m := model.Message{Role: model.RoleAssistant}
					for _, p := range c.Parts {
						if fc := p.FunctionCall; fc != nil {
							m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: string(fc.Args)})
							want = append(want, "call "+fc.ID)
						} else if p.Text != "" && !p.Thought {
							m.Parts = append(m.Parts, model.TextPart(p.Text))
						}
					}
					msgs = append(msgs, m)
					continue
				}
				u := model.Message{Role: model.RoleUser}
				for _, p := range c.Parts {
					if fr := p.FunctionResponse; fr != nil {
						msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: fr.ID, ToolName: fr.Name, Parts: []model.Part{model.TextPart(string(fr.Response))}})
						want = append(want, "response "+fr.ID)
					} else if p.Text != "" {
						u.Parts = append(u.Parts, model.TextPart(p.Text))
					}
				}
				if len(u.Parts) > 0 {
					msgs = append(msgs, u)
				}
			}
			if !slices.ContainsFunc(want, func(s string) bool { return !strings.HasSuffix(s, " ") }) {
				continue // no call with an id
			}
			m, err := New(Options{Model: "gemini-2.5-flash", APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			wr, err := m.request(&model.Request{Messages: msgs}, false)
			if err != nil {
				t.Fatalf("%s, exchange %d: %v", filepath.Base(file), i+1, err)
			}
			var got []string
			for _, c := range wr.Contents {
				for _, p := range c.Parts {
					if p.FunctionCall != nil {
						got = append(got, "call "+p.FunctionCall.ID)
					}
					if p.FunctionResponse != nil {
						got = append(got, "response "+p.FunctionResponse.ID)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, exchange %d: ids (-recorded +sent):\n%s", filepath.Base(file), i+1, diff)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no recorded request has a call with an id")
	}
}
