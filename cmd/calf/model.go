package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// defaultModel is the model used when neither --model nor CALF_MODEL names one.
const defaultModel = "openai:gpt-4o-mini"

// Environment variables that select the model.
const (
	envModel   = "CALF_MODEL"
	envAPIKey  = "OPENAI_API_KEY"
	envBaseURL = "OPENAI_BASE_URL"
)

// errNoModel is returned when there is neither an API key nor the address
// of a server to send requests to. Its text says what to set.
//
//lint:ignore ST1005 the message is printed as is, as sentences.
var errNoModel = errors.New("no model configured. Set OPENAI_API_KEY for OpenAI, or point at any OpenAI-compatible server " +
	"with OPENAI_BASE_URL=http://127.0.0.1:11434/v1 (Ollama) or --model http://HOST:PORT/v1#MODEL.")

// errNoModels is returned when a server asked for its models lists none.
var errNoModels = errors.New("the server lists no models")

// discoveryTimeout bounds the request that asks a server for its models.
const discoveryTimeout = 30 * time.Second

// providers maps the provider of a model, as in --model openai:NAME, to the
// constructor of its models. A provider added here is accepted by --model.
var providers = map[string]func(c modelChoice) (model.Model, error){
	"openai": func(c modelChoice) (model.Model, error) {
		return openai.New(openai.Options{Model: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL})
	},
}

// providerNames returns the known providers, sorted.
func providerNames() []string {
	names := make([]string, 0, len(providers))
	for p := range providers {
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}

// modelChoice is a model to talk to, as selected by --model, CALF_MODEL and
// the provider's environment variables.
type modelChoice struct {
	// Provider is a key of providers.
	Provider string
	// BaseURL is the base URL of the API, ending in /v1; empty means the
	// provider's own API.
	BaseURL string
	// Name is the model's name. Empty in a parsed spec means: ask the
	// server at BaseURL.
	Name string
	// APIKey authenticates the requests; it may be empty for a server at
	// BaseURL.
	APIKey string
}

// parseModelSpec parses a --model value: "PROVIDER:NAME" for a known
// provider ("openai:gpt-4o-mini"); the base URL of an OpenAI-compatible
// server, optionally followed by '#' and the model's name
// ("http://127.0.0.1:11434/v1#llama3.2"); or a bare model name for the
// OpenAI provider. A bare name may hold ':' ("llama3.2:1b"): only a known
// provider before the first ':' is taken as one.
func parseModelSpec(spec string) (modelChoice, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return modelChoice{}, errors.New("--model: empty model")
	}
	if strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://") {
		base, name, _ := strings.Cut(spec, "#")
		base, err := checkBaseURL(base)
		if err != nil {
			return modelChoice{}, fmt.Errorf("--model: %w", err)
		}
		return modelChoice{Provider: "openai", BaseURL: base, Name: strings.TrimSpace(name)}, nil
	}
	if p, name, ok := strings.Cut(spec, ":"); ok {
		if _, known := providers[p]; known {
			if name == "" {
				return modelChoice{}, fmt.Errorf("--model %q: no model name after %q", spec, p+":")
			}
			return modelChoice{Provider: p, Name: name}, nil
		}
	}
	return modelChoice{Provider: "openai", Name: spec}, nil
}

// checkBaseURL validates the base URL of an API and returns it without a
// trailing slash.
func checkBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid base URL %q: want http(s)://HOST[:PORT]/PATH, such as http://127.0.0.1:11434/v1", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// selectModel chooses the model from spec (the --model flag; empty means
// $CALF_MODEL, else defaultModel) and the environment, read with getenv:
// OPENAI_API_KEY, and OPENAI_BASE_URL unless spec is a URL. A URL without
// a model name is completed with the first model the server lists, asked
// for with hc. Errors: a usage error for a malformed spec, one wrapping
// errNoModel when there is neither a key nor a base URL, errNoModels when
// the server lists none.
func selectModel(ctx context.Context, spec string, getenv func(string) string, hc *http.Client) (modelChoice, error) {
	if spec == "" {
		spec = getenv(envModel)
	}
	if spec == "" {
		spec = defaultModel
	}
	c, err := parseModelSpec(spec)
	if err != nil {
		return modelChoice{}, usageError(err)
	}
	if c.BaseURL == "" && c.Provider == "openai" {
		if env := strings.TrimSpace(getenv(envBaseURL)); env != "" {
			if c.BaseURL, err = checkBaseURL(env); err != nil {
				return modelChoice{}, usageError(fmt.Errorf("%s: %w", envBaseURL, err))
			}
		}
	}
	c.APIKey = strings.TrimSpace(getenv(envAPIKey))
	if c.APIKey == "" && c.BaseURL == "" {
		return modelChoice{}, usageError(errNoModel)
	}
	if c.Name == "" {
		if c.Name, err = discoverModel(ctx, hc, c.BaseURL, c.APIKey); err != nil {
			return modelChoice{}, err
		}
	}
	return c, nil
}

// discoverModel returns the first model that the server at baseURL lists
// at GET {baseURL}/models.
func discoverModel(ctx context.Context, hc *http.Client, baseURL, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/models", nil)
	if err != nil {
		return "", fmt.Errorf("list the models of %s: %w", baseURL, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("list the models of %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", fmt.Errorf("list the models of %s: %w", baseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) && !strings.HasSuffix(baseURL, "/v1") {
			hint = " (is the base URL missing /v1?)"
		}
		return "", fmt.Errorf("list the models of %s: HTTP %s: %s%s", baseURL, resp.Status, oneLine(string(body), 200), hint)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("list the models of %s: the answer is not a model list: %w", baseURL, err)
	}
	for _, m := range list.Data {
		if m.ID != "" {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("%w at %s/models: name one with --model %s#MODEL", errNoModels, baseURL, baseURL)
}

// newModel returns the model c describes.
func newModel(c modelChoice) (model.Model, error) {
	mk, ok := providers[c.Provider]
	if !ok {
		return nil, usageError(fmt.Errorf("unknown model provider %q: known providers: %s", c.Provider, strings.Join(providerNames(), ", ")))
	}
	m, err := mk(c)
	if err != nil {
		if errors.Is(err, model.ErrNoModel) {
			return nil, usageError(errNoModel)
		}
		return nil, usageError(err)
	}
	return m, nil
}
