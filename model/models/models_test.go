package models_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		"openai:gpt-4o-mini": "OPENAI_API_KEY, or OPENAI_BASE_URL",
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
