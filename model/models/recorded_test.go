package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/tool"
)

// recordings is the folder of real provider traffic beside the repository.
var recordings = filepath.Join("..", "..", "..", "shared", "recordings")

// exchange is one recorded answer and the path it answered.
type exchange struct {
	path        string // the request's path and query
	status      int
	contentType string
	body        []byte
}

// readExchanges reads the exchanges of an httprr recording, skipping the
// test when the recordings are absent.
func readExchanges(t *testing.T, file string) []exchange {
	t.Helper()
	xs, err := cassette.ReadFile(filepath.Join(recordings, file))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent: the recorded-traffic tests need ../shared/recordings", recordings)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make([]exchange, len(xs))
	for i, x := range xs {
		out[i] = exchange{path: x.Request.URL.RequestURI(), status: x.Response.StatusCode,
			contentType: x.Response.Header.Get("Content-Type"), body: x.ResponseBody}
	}
	return out
}

// replay serves exs in order, each to a request for its path.
func replay(t *testing.T, exs []exchange) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(exs) {
			t.Errorf("request %d (%s) past the %d recorded", i+1, r.URL.RequestURI(), len(exs))
			http.Error(w, "no more recorded answers", http.StatusGone)
			return
		}
		if got, want := r.URL.RequestURI(), exs[i].path; got != want {
			t.Errorf("request %d went to %s; the recording answered %s", i+1, got, want)
		}
		w.Header().Set("Content-Type", exs[i].contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(exs[i].body)))
		w.WriteHeader(exs[i].status)
		_, _ = w.Write(exs[i].body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recordedProvider says how to point a provider's model at a server.
type recordedProvider struct {
	spec    string
	keyVar  string
	baseVar string
	base    func(srv string) string
}

var (
	anthropicRec = recordedProvider{"anthropic:claude-3-5-haiku", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", func(s string) string { return s }}
	geminiRec    = recordedProvider{"gemini:gemini-2.5-flash", "GEMINI_API_KEY", "GEMINI_BASE_URL", func(s string) string { return s }}
	openaiRec    = recordedProvider{"openai:gpt-4o", "OPENAI_API_KEY", "OPENAI_BASE_URL", func(s string) string { return s + "/v1" }}
)

func (p recordedProvider) open(t *testing.T, exs []exchange) model.Model {
	t.Helper()
	srv := replay(t, exs)
	m, err := models.Open(p.spec, env(p.keyVar, "test-key", p.baseVar, p.base(srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A W1-shaped run (a tool call, then the answer) and a streamed run go
// through each native adapter and the whole agent, against servers that
// answer with real recorded traffic: the agent calls the tool the recorded
// model asked for, and its output is the recorded final answer.
func TestAgentOnRecordedTraffic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider recordedProvider
		// files and the exchange of each that the run is answered with.
		files  []string
		picks  []int
		stream bool
	}{
		{"anthropic tool then answer", anthropicRec, []string{"anthropic/langchaingo__TestAnthropic_GenerateContentWithTool.httprr"}, []int{0, 1}, false},
		{"anthropic thinking, tool then answer", anthropicRec, []string{"anthropic/langchaingo__TestAnthropic_SingleToolCallWithThinking.httprr"}, []int{0, 1}, false},
		{"gemini tool then answer", geminiRec, []string{"gemini/adk-go__TestFunctionTool.httprr"}, []int{0, 1}, false},
		{"openai tool then answer", openaiRec, []string{"openai/langchaingo__TestFunctionCall.httprr", "openai/langchaingo__TestClient_CreateChatCompletion.httprr"}, []int{0, 0}, false},
		{"anthropic streamed", anthropicRec, []string{"anthropic/langchaingo__TestAnthropic_GenerateContentWithStreaming.httprr"}, []int{0}, true},
		{"gemini streamed", geminiRec, []string{"gemini/adk-go__TestLLMAgentStreamingModeSSE.httprr"}, []int{0}, true},
		{"openai streamed", openaiRec, []string{"openai/langchaingo__TestClient_CreateChatCompletionStream.httprr"}, []int{0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exs []exchange
			for i, pick := range tc.picks {
				file := tc.files[min(i, len(tc.files)-1)]
				all := readExchanges(t, file)
				exs = append(exs, all[pick])
			}
			if tc.provider.spec == geminiRec.spec {
				// The recorded path names the model: ask for that one.
				model := strings.TrimPrefix(exs[0].path, "/v1beta/models/")
				model, _, _ = strings.Cut(model, ":")
				tc.provider.spec = "gemini:" + model
			}
			// What the adapter alone reads in the first and the last answer.
			first, last := decode(t, tc.provider, exs[0], tc.stream), decode(t, tc.provider, exs[len(exs)-1], tc.stream)
			var tools []tool.Tool
			calls := 0
			var mu sync.Mutex
			if len(exs) > 1 {
				if len(first.Message.ToolCalls) == 0 {
					t.Fatalf("the first recorded answer calls no tool: %+v", first.Message)
				}
				seen := map[string]bool{}
				for _, c := range first.Message.ToolCalls {
					if seen[c.Name] {
						continue
					}
					seen[c.Name] = true
					tools = append(tools, tool.NewRaw(model.ToolDefinition{Name: c.Name, Description: "recorded", Parameters: json.RawMessage(`{"type":"object"}`)},
						func(context.Context, json.RawMessage) (*tool.Result, error) {
							mu.Lock()
							calls++
							mu.Unlock()
							return tool.TextResult("sunny, 22 degrees"), nil
						}))
				}
			}
			m := tc.provider.open(t, exs)
			name := "rec" + strconv.Itoa(len(tc.name)) + strings.NewReplacer(" ", "", ",", "").Replace(tc.name)
			a := agent.Must(agent.New(name, m, &agent.Options{Tools: tools}))
			want := last.Message.Text()
			if !tc.stream {
				out, err := a.Run(t.Context(), local.Runtime(), "recorded question", nil)
				if err != nil {
					t.Fatal(err)
				}
				if out.Output != want || out.Steps != len(exs) || calls != len(first.Message.ToolCalls) {
					t.Errorf("output %q after %d model calls and %d tool calls; want %q after %d and %d", out.Output, out.Steps, calls, want, len(exs), len(first.Message.ToolCalls))
				}
				if out.Usage.InputTokens <= 0 || out.Usage.OutputTokens <= 0 || out.Usage.Requests != int64(len(exs)) {
					t.Errorf("usage %+v", out.Usage)
				}
				return
			}
			var text strings.Builder
			var output string
			for ev, err := range a.RunStream(t.Context(), local.Runtime(), "recorded question", nil) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev.Kind {
				case agent.EventDelta:
					text.WriteString(ev.Delta.Text)
				case agent.EventOutput:
					s, err := a.DecodeOutput(ev.Output)
					if err != nil {
						t.Fatal(err)
					}
					output = s
					if ev.Output.Usage.OutputTokens <= 0 {
						t.Errorf("usage %+v", ev.Output.Usage)
					}
				}
			}
			if output != want || text.String() != want || want == "" {
				t.Errorf("streamed %q, output %q; want %q", text.String(), output, want)
			}
		})
	}
}

// decode returns what the adapter of p reads in ex.
func decode(t *testing.T, p recordedProvider, ex exchange, stream bool) *model.Response {
	t.Helper()
	m := p.open(t, []exchange{ex})
	req := &model.Request{Messages: []model.Message{model.UserMessage("recorded question")}}
	if !stream {
		resp, err := m.Generate(t.Context(), req)
		if err != nil {
			t.Fatalf("the adapter alone on the recorded answer: %v", err)
		}
		return resp
	}
	var resp *model.Response
	for c, err := range model.Stream(t.Context(), m, req) {
		if err != nil {
			t.Fatalf("the adapter alone on the recorded stream: %v", err)
		}
		if c.Response != nil {
			resp = c.Response
		}
	}
	return resp
}
