package models_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/internal/modelspec"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
)

func env(kv ...string) *models.Options {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &models.Options{Getenv: func(k string) string { return m[k] }}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want models.Spec
	}{
		{"openai:gpt-4o-mini", models.Spec{Provider: "openai", Name: "gpt-4o-mini"}},
		{"gpt-4o", models.Spec{Provider: "openai", Name: "gpt-4o"}},
		{"llama3.2:1b", models.Spec{Provider: "openai", Name: "llama3.2:1b"}},
		{"ollama:llama3.2:1b", models.Spec{Provider: "ollama", Name: "llama3.2:1b"}},
		{"http://127.0.0.1:11434/v1/", models.Spec{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1"}},
		{"https://openrouter.ai/api/v1#openai/gpt-4o", models.Spec{Provider: "openai", BaseURL: "https://openrouter.ai/api/v1", Name: "openai/gpt-4o"}},
	} {
		got, err := models.Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.spec, diff)
		}
	}
	for _, bad := range []string{"", "  ", "openai:", "http://#x", "https:///v1"} {
		if _, err := models.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestMissingKeyNamesTheVariable(t *testing.T) {
	for spec, want := range map[string]string{
		"openai:gpt-4o-mini":          "OPENAI_API_KEY, or OPENAI_BASE_URL",
		"openai-responses:gpt-5-mini": "OPENAI_API_KEY, or OPENAI_BASE_URL",
		"anthropic:claude-sonnet-4-5": "ANTHROPIC_API_KEY",
		"gemini:gemini-2.5-flash":     "GEMINI_API_KEY or GOOGLE_API_KEY",
	} {
		_, err := models.Open(spec, env())
		if !errors.Is(err, model.ErrNoModel) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) without a key: %v; want model.ErrNoModel naming %s", spec, err, want)
		}
	}
	if _, err := models.Open("ollama:llama3.2", env()); err != nil {
		t.Errorf("ollama needs no key: %v", err)
	}
	if _, err := models.Open("http://127.0.0.1:1/v1", env()); err == nil || !strings.Contains(err.Error(), "#NAME") {
		t.Errorf("a URL without a name: %v; want an error that asks for #NAME", err)
	}
}

// Each provider's model talks to the base URL its environment gives, with
// its key.
func TestOpenUsesTheEnvironment(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		spec string
		opts *models.Options
		name string
		want string
	}{
		{"openai:m", env("OPENAI_API_KEY", "k1", "OPENAI_BASE_URL", srv.URL+"/v1"), "openai:m", "/v1/chat/completions Bearer k1"},
		{srv.URL + "/v1#m", env("OPENAI_API_KEY", "k2"), "openai:m", "/v1/chat/completions Bearer k2"},
		{"ollama:m", env("OLLAMA_HOST", strings.TrimPrefix(srv.URL, "http://")), "openai:m", "/v1/chat/completions "},
	} {
		got = nil
		m, err := models.Open(tc.spec, tc.opts)
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.spec, err)
		}
		if m.Name() != tc.name {
			t.Errorf("Open(%q).Name() = %q, want %q", tc.spec, m.Name(), tc.name)
		}
		if _, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s sent %q, want %q", tc.spec, got, tc.want)
		}
	}
}

func TestUnknownProvider(t *testing.T) {
	if _, err := models.OpenConfig("nope", models.Config{Name: "x"}); !errors.Is(err, models.ErrUnknownProvider) {
		t.Errorf("OpenConfig of an unknown provider: %v", err)
	}
	if lines := models.About(); len(lines) != len(models.Providers()) {
		t.Errorf("About has %d lines for %d providers", len(lines), len(models.Providers()))
	}
}

// The native providers: each model is the provider's, talks to the base
// URL its environment gives, with the key where the provider wants it.
func TestOpenNativeProviders(t *testing.T) {
	type seen struct{ path, key string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got = seen{r.URL.Path, r.Header.Get("Authorization") + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key")}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			_, _ = io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-mini","output":[{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		spec string
		opts *models.Options
		name string
		want seen
	}{
		{"anthropic:claude-haiku-4-5", env("ANTHROPIC_API_KEY", "ka", "ANTHROPIC_BASE_URL", srv.URL), "anthropic:claude-haiku-4-5", seen{"/v1/messages", "ka"}},
		{"gemini:gemini-2.5-flash", env("GOOGLE_API_KEY", "kg", "GEMINI_BASE_URL", srv.URL), "gemini:gemini-2.5-flash", seen{"/v1beta/models/gemini-2.5-flash:generateContent", "kg"}},
		{"openai-responses:gpt-5-mini", env("OPENAI_API_KEY", "ko", "OPENAI_BASE_URL", srv.URL+"/v1"), "openai-responses:gpt-5-mini", seen{"/v1/responses", "Bearer ko"}},
	} {
		got = seen{}
		m, err := models.Open(tc.spec, tc.opts)
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.spec, err)
		}
		if m.Name() != tc.name {
			t.Errorf("Open(%q).Name() = %q, want %q", tc.spec, m.Name(), tc.name)
		}
		resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}})
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if resp.Message.Text() != "hi" || got != tc.want {
			t.Errorf("%s: answered %q after a request %+v; want hi after %+v", tc.spec, resp.Message.Text(), got, tc.want)
		}
	}
}

// TestProvidersOfSpecs checks that the specs are parsed with the
// providers of the table.
func TestProvidersOfSpecs(t *testing.T) {
	if got := models.Providers(); !slices.Equal(got, modelspec.Providers) {
		t.Errorf("Providers() = %v, modelspec.Providers = %v", got, modelspec.Providers)
	}
}
