package openai_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// azureCall is a request as a fake Azure OpenAI resource saw it.
type azureCall struct {
	method, path, query string
	apiKey, auth        string
	model               string
}

// azureFake is a fake Azure OpenAI resource: chat completions and
// embeddings on the deployment's URL, the Responses API on the v1 surface.
func azureFake(t *testing.T) (string, func() []azureCall) {
	t.Helper()
	var mu sync.Mutex
	var calls []azureCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		calls = append(calls, azureCall{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Api-Key"), r.Header.Get("Authorization"), body.Model})
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions") && body.Stream:
			writeBody(w, 200, "text/event-stream", []byte(chatStreamBody))
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			writeBody(w, 200, "application/json", []byte(chatCompletionBody))
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			writeBody(w, 200, "application/json", []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`))
		case r.URL.Path == "/openai/v1/responses":
			_ = json.NewEncoder(w).Encode(responseObject("resp_az", "gpt-4o-mini", usageOf(13, 0, 3, 0), messageItem("msg_1", "All good.")))
		default:
			writeBody(w, 404, "application/json", []byte(`{"error":{"code":"404","message":"Resource not found"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []azureCall {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
}

func TestAzure(t *testing.T) {
	endpoint, calls := azureFake(t)
	t.Setenv("OPENAI_API_VERSION", "")
	t.Setenv("AZURE_OPENAI_API_KEY", "")
	t.Setenv("AZURE_OPENAI_ENDPOINT", "")
	req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}, MaxTokens: 10}

	opts := openai.Options{Model: "gpt-4o-mini", APIKey: "az-key", MaxRetries: -1,
		Azure: &openai.AzureOptions{Endpoint: endpoint + "/", Deployment: "my chat"}}
	m, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "openai:gpt-4o-mini" {
		t.Errorf("Name() = %q; the model, not the deployment, names it", m.Name())
	}
	if resp, err := m.Generate(t.Context(), req); err != nil || resp.Message.Text() != "All good." {
		t.Fatalf("Generate: %v, %v", resp, err)
	}
	if _, _, err := streamAll(t, m, req); err != nil {
		t.Fatal(err)
	}
	e, err := openai.NewEmbedder(openai.Options{Model: "text-embedding-3-small", APIKey: "az-key", MaxRetries: -1,
		Azure: &openai.AzureOptions{Endpoint: endpoint, APIVersion: "2025-04-01-preview"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.Embed(t.Context(), []string{"hi"}); err != nil || len(v) != 1 || len(v[0]) != 2 {
		t.Fatalf("Embed: %v, %v", v, err)
	}
	r, err := openai.NewResponses(opts)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := r.Generate(t.Context(), req); err != nil || resp.Message.Text() != "All good." {
		t.Fatalf("Responses: %v, %v", resp, err)
	}
	want := []azureCall{
		{"POST", "/openai/deployments/my chat/chat/completions", "api-version=2024-10-21", "az-key", "", "my chat"},
		{"POST", "/openai/deployments/my chat/chat/completions", "api-version=2024-10-21", "az-key", "", "my chat"},
		{"POST", "/openai/deployments/text-embedding-3-small/embeddings", "api-version=2025-04-01-preview", "az-key", "", "text-embedding-3-small"},
		{"POST", "/openai/v1/responses", "", "az-key", "", "my chat"},
	}
	if diff := cmp.Diff(want, calls(), cmp.AllowUnexported(azureCall{})); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestAzureFromEnvironment(t *testing.T) {
	endpoint, calls := azureFake(t)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("AZURE_OPENAI_ENDPOINT", endpoint)
	t.Setenv("AZURE_OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_API_VERSION", "2024-06-01")
	m, err := openai.FromEnv("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	want := []azureCall{{"POST", "/openai/deployments/gpt-4o/chat/completions", "api-version=2024-06-01", "env-key", "", "gpt-4o"}}
	if diff := cmp.Diff(want, calls(), cmp.AllowUnexported(azureCall{})); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	// An Entra ID token instead of a key.
	t.Setenv("AZURE_OPENAI_API_KEY", "")
	m, err = openai.New(openai.Options{Model: "gpt-4o", Azure: &openai.AzureOptions{}, Headers: map[string]string{"Authorization": "Bearer entra-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	want = []azureCall{{"POST", "/openai/deployments/gpt-4o/chat/completions", "api-version=2024-06-01", "", "Bearer entra-token", "gpt-4o"}}
	if diff := cmp.Diff(want, calls(), cmp.AllowUnexported(azureCall{})); diff != "" {
		t.Errorf("requests with a token (-want +got):\n%s", diff)
	}
}

func TestAzureMisconfigured(t *testing.T) {
	t.Setenv("AZURE_OPENAI_ENDPOINT", "")
	t.Setenv("AZURE_OPENAI_API_KEY", "")
	for _, tt := range []struct {
		name    string
		opts    openai.Options
		noModel bool
		want    string
	}{
		{"no endpoint", openai.Options{Model: "m", APIKey: "k", Azure: &openai.AzureOptions{}}, true, "AZURE_OPENAI_ENDPOINT"},
		{"no key", openai.Options{Model: "m", Azure: &openai.AzureOptions{Endpoint: "https://r.openai.azure.com"}}, true, "AZURE_OPENAI_API_KEY"},
		{"bad endpoint", openai.Options{Model: "m", APIKey: "k", Azure: &openai.AzureOptions{Endpoint: "r.openai.azure.com"}}, false, "invalid base URL"},
		{"with a base URL", openai.Options{Model: "m", APIKey: "k", BaseURL: "http://127.0.0.1/v1", Azure: &openai.AzureOptions{Endpoint: "https://r.openai.azure.com"}}, false, "BaseURL"},
	} {
		_, err := openai.New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, model.ErrNoModel) != tt.noModel {
			t.Errorf("%s: err = %v, want one saying %s (ErrNoModel: %v)", tt.name, err, tt.want, tt.noModel)
		}
	}
}
