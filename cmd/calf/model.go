package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
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

// parseModelSpec parses a --model value (see models.Parse): "PROVIDER:NAME"
// for a known provider ("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5");
// the base URL of an OpenAI-compatible server, optionally followed by '#'
// and the model's name ("http://127.0.0.1:11434/v1#llama3.2"); or a bare
// model name for the OpenAI provider.
func parseModelSpec(spec string) (modelChoice, error) {
	s, err := models.Parse(spec)
	if err != nil {
		return modelChoice{}, fmt.Errorf("--model: %w", err)
	}
	if s.BaseURL != "" {
		if s.BaseURL, err = checkBaseURL(s.BaseURL); err != nil {
			return modelChoice{}, fmt.Errorf("--model: %w", err)
		}
	}
	return modelChoice{Provider: s.Provider, BaseURL: s.BaseURL, Name: s.Name}, nil
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
	cfg, err := models.Configure(models.Spec{Provider: c.Provider, Name: c.Name, BaseURL: c.BaseURL}, &models.Options{Getenv: getenv})
	if err != nil {
		if errors.Is(err, model.ErrNoModel) && c.Provider == "openai" {
			return modelChoice{}, usageError(errNoModel)
		}
		return modelChoice{}, usageError(err)
	}
	c.BaseURL, c.APIKey = cfg.BaseURL, cfg.APIKey
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
	m, err := models.OpenConfig(c.Provider, models.Config{Name: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL})
	if err != nil {
		if errors.Is(err, model.ErrNoModel) && c.Provider == "openai" {
			return nil, usageError(errNoModel)
		}
		return nil, usageError(err)
	}
	return m, nil
}
