package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model/modeltest"
)

func TestParseModelSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec    string
		want    modelChoice
		wantErr string
	}{
		{spec: "openai:gpt-4o-mini", want: modelChoice{Provider: "openai", Name: "gpt-4o-mini"}},
		{spec: "gpt-4o", want: modelChoice{Provider: "openai", Name: "gpt-4o"}},
		{spec: "llama3.2:1b", want: modelChoice{Provider: "openai", Name: "llama3.2:1b"}},
		{spec: "openai:qwen2.5:7b", want: modelChoice{Provider: "openai", Name: "qwen2.5:7b"}},
		{spec: "http://127.0.0.1:11434/v1", want: modelChoice{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1"}},
		{spec: "http://127.0.0.1:11434/v1/", want: modelChoice{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1"}},
		{spec: "http://127.0.0.1:11434/v1#llama3.2", want: modelChoice{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1", Name: "llama3.2"}},
		{spec: "https://openrouter.ai/api/v1#openai/gpt-4o", want: modelChoice{Provider: "openai", BaseURL: "https://openrouter.ai/api/v1", Name: "openai/gpt-4o"}},
		{spec: "http://localhost:8080/v1#", want: modelChoice{Provider: "openai", BaseURL: "http://localhost:8080/v1"}},
		{spec: "", wantErr: "empty model"},
		{spec: "openai:", wantErr: `no model name after "openai:"`},
		{spec: "https:///v1#x", wantErr: "invalid base URL"},
	} {
		got, err := parseModelSpec(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseModelSpec(%q) = %+v, %v; want an error containing %q", tc.spec, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseModelSpec(%q): %v", tc.spec, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseModelSpec(%q) (-want +got):\n%s", tc.spec, diff)
		}
	}
}

func TestSelectModel(t *testing.T) {
	t.Parallel()
	// A server that lists models and wants a key.
	listing := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{APIKey: "sk-local", Models: []string{"llama3.2", "qwen2.5:7b"}})
	t.Cleanup(listing.Close)
	// A server whose model list is empty.
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	t.Cleanup(empty.Close)
	// A server without /v1/models.
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)

	for _, tc := range []struct {
		name    string
		spec    string
		env     map[string]string
		want    modelChoice
		wantErr error  // matched with errors.Is
		errText string // in the error
		usage   bool   // a usage error
	}{
		{
			name: "default with a key",
			env:  map[string]string{envAPIKey: "sk-1"},
			want: modelChoice{Provider: "openai", Name: "gpt-4o-mini", APIKey: "sk-1"},
		},
		{
			name: "CALF_MODEL",
			env:  map[string]string{envAPIKey: "sk-1", envModel: "openai:gpt-4.1"},
			want: modelChoice{Provider: "openai", Name: "gpt-4.1", APIKey: "sk-1"},
		},
		{
			name: "flag over CALF_MODEL",
			spec: "gpt-4o",
			env:  map[string]string{envAPIKey: "sk-1", envModel: "openai:gpt-4.1"},
			want: modelChoice{Provider: "openai", Name: "gpt-4o", APIKey: "sk-1"},
		},
		{
			name: "bare name on OPENAI_BASE_URL",
			spec: "llama3.2",
			env:  map[string]string{envBaseURL: "http://127.0.0.1:11434/v1/"},
			want: modelChoice{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1", Name: "llama3.2"},
		},
		{
			name: "URL and name over OPENAI_BASE_URL",
			spec: "http://10.0.0.2:8000/v1#mistral",
			env:  map[string]string{envBaseURL: "http://127.0.0.1:11434/v1", envAPIKey: "sk-2"},
			want: modelChoice{Provider: "openai", BaseURL: "http://10.0.0.2:8000/v1", Name: "mistral", APIKey: "sk-2"},
		},
		{
			name: "URL without a name: the first model the server lists",
			spec: listing.URL(),
			env:  map[string]string{envAPIKey: "sk-local"},
			want: modelChoice{Provider: "openai", BaseURL: listing.URL(), Name: "llama3.2", APIKey: "sk-local"},
		},
		{
			name: "CALF_MODEL as a URL",
			env:  map[string]string{envAPIKey: "sk-local", envModel: listing.URL() + "#"},
			want: modelChoice{Provider: "openai", BaseURL: listing.URL(), Name: "llama3.2", APIKey: "sk-local"},
		},
		{
			name:    "URL without a name, wrong key",
			spec:    listing.URL(),
			env:     map[string]string{envAPIKey: "sk-wrong"},
			errText: "401",
		},
		{
			name:    "server lists no models",
			spec:    empty.URL + "/v1",
			wantErr: errNoModels,
			errText: "--model " + empty.URL + "/v1#MODEL",
		},
		{
			name:    "server without a model list",
			spec:    missing.URL + "/v1",
			errText: "list the models of " + missing.URL + "/v1: HTTP 404",
		},
		{
			name:    "no key and no URL",
			spec:    "gpt-4o",
			wantErr: errNoModel,
			usage:   true,
		},
		{
			name:    "invalid OPENAI_BASE_URL",
			spec:    "llama3.2",
			env:     map[string]string{envBaseURL: "127.0.0.1:11434"},
			errText: "OPENAI_BASE_URL: invalid base URL",
			usage:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string { return tc.env[k] }
			got, err := selectModel(t.Context(), tc.spec, getenv, http.DefaultClient)
			if tc.wantErr == nil && tc.errText == "" {
				if err != nil {
					t.Fatalf("selectModel(%q): %v", tc.spec, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("selectModel(%q) (-want +got):\n%s", tc.spec, diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("selectModel(%q) = %+v; want an error", tc.spec, got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("selectModel(%q) error %v; want one matching %v", tc.spec, err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("selectModel(%q) error %q; want it to contain %q", tc.spec, err, tc.errText)
			}
			var ee *exitError
			if isUsage := errors.As(err, &ee) && ee.code == exitUsage; isUsage != tc.usage {
				t.Errorf("selectModel(%q) error %v: usage error %t, want %t", tc.spec, err, isUsage, tc.usage)
			}
		})
	}
}
