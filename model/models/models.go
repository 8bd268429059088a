package models

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/calf-go/calf/internal/modelspec"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/anthropic"
	"github.com/calf-go/calf/model/gemini"
	"github.com/calf-go/calf/model/openai"
)

// Options configures [Open].
type Options struct {
	// Getenv reads the environment. Default: os.Getenv.
	Getenv func(string) string
	// HTTPClient sends the model's requests. Default: the adapter's.
	HTTPClient *http.Client
	// Logger receives the adapter's debug records. Default: none.
	Logger *slog.Logger
}

func (o *Options) getenv(k string) string {
	if o == nil || o.Getenv == nil {
		return strings.TrimSpace(os.Getenv(k))
	}
	return strings.TrimSpace(o.Getenv(k))
}

// Config is what a provider's constructor gets: the model's name, the key
// and base URL read from the environment (or the spec), and the options.
type Config struct {
	Name       string
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// provider is one entry of the table of providers.
type provider struct {
	// keyEnv are the variables that may hold the API key, in order.
	keyEnv []string
	// baseEnv is the variable that may hold the base URL.
	baseEnv string
	// keyOptional: the key may be missing when a base URL is set (a local
	// server needs none).
	keyOptional bool
	// noKey: the provider needs no key at all (a local server).
	noKey bool
	// defaultBase is the base URL when baseEnv is unset (noKey providers).
	defaultBase string
	// about describes the provider in [Providers]' help text.
	about string
	open  func(c Config) (model.Model, error)
}

// providers is the table of providers, by the prefix of their specs.
var providers = map[string]provider{
	"openai": {keyEnv: []string{"OPENAI_API_KEY"}, baseEnv: "OPENAI_BASE_URL", keyOptional: true,
		about: "OpenAI's Chat Completions API, or any compatible server at OPENAI_BASE_URL",
		open: func(c Config) (model.Model, error) {
			return openai.New(openai.Options{Model: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient, Logger: c.Logger})
		}},
	"openai-responses": {keyEnv: []string{"OPENAI_API_KEY"}, baseEnv: "OPENAI_BASE_URL", keyOptional: true,
		about: "OpenAI's Responses API (reasoning carried from turn to turn, nothing stored at OpenAI)",
		open: func(c Config) (model.Model, error) {
			return openai.NewResponses(openai.Options{Model: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient, Logger: c.Logger})
		}},
	"anthropic": {keyEnv: []string{"ANTHROPIC_API_KEY"}, baseEnv: "ANTHROPIC_BASE_URL",
		about: "Anthropic's Messages API (extended thinking, prompt caching)",
		open: func(c Config) (model.Model, error) {
			return anthropic.New(anthropic.Options{Model: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient, Logger: c.Logger})
		}},
	"gemini": {keyEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, baseEnv: "GEMINI_BASE_URL",
		about: "Google's Gemini through the Generative Language API (thought signatures, schema checked when the agent is built)",
		open: func(c Config) (model.Model, error) {
			return gemini.New(gemini.Options{Model: c.Name, APIKey: c.APIKey, BaseURL: c.BaseURL, HTTPClient: c.HTTPClient, Logger: c.Logger})
		}},
	"ollama": {noKey: true, baseEnv: "OLLAMA_HOST", defaultBase: "http://127.0.0.1:11434",
		about: "a local Ollama server (OLLAMA_HOST, default http://127.0.0.1:11434), through its OpenAI-compatible API",
		open: func(c Config) (model.Model, error) {
			return openai.New(openai.Options{Model: c.Name, BaseURL: ollamaBase(c.BaseURL), HTTPClient: c.HTTPClient, Logger: c.Logger})
		}},
}

// ollamaBase returns the OpenAI-compatible base URL of the Ollama server
// at host ("127.0.0.1:11434", "http://gpu-box:11434").
func ollamaBase(host string) string {
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	host = strings.TrimRight(host, "/")
	if !strings.HasSuffix(host, "/v1") {
		host += "/v1"
	}
	return host
}

// Providers returns the prefixes [Open] knows, sorted.
func Providers() []string {
	names := make([]string, 0, len(providers))
	for p := range providers {
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}

// ErrUnknownProvider is matched by the error of [Open] for a spec whose
// prefix names no provider.
var ErrUnknownProvider = errors.New("models: unknown provider")

// Spec is a parsed model spec: its Provider (the prefix, "openai" for a
// URL spec), its model's Name (empty for a URL spec without one) and the
// BaseURL of a URL spec (without its "#NAME" and trailing slash).
type Spec = modelspec.Spec

// Parse parses spec: "PROVIDER:NAME" for a known provider; the base URL of
// an OpenAI-compatible server followed by '#' and the model's name
// ("http://127.0.0.1:8080/v1#qwen2.5"; the name may be left out, for the
// caller to ask the server); or a bare name, an OpenAI model. A bare name
// may hold ':' ("llama3.2:1b"): only a known provider before the first ':'
// is taken as one.
func Parse(spec string) (Spec, error) { return modelspec.Parse(spec) }

// Open returns the model spec names (see [Parse] and the package
// documentation), configured from the environment. A missing key is an
// error matching [model.ErrNoModel] that names the variable to set; a spec
// without a model name (a URL without "#NAME") is an error too.
func Open(spec string, opts *Options) (model.Model, error) {
	s, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	c, err := Configure(s, opts)
	if err != nil {
		return nil, err
	}
	if c.Name == "" {
		return nil, fmt.Errorf("models: %q names no model: add #NAME", spec)
	}
	return providers[s.Provider].open(c)
}

// Configure returns the configuration of the model s names, read from the
// environment: what [Open] passes to the provider's constructor. A caller
// that completes a URL spec without a name (by asking the server) calls
// Configure, then [OpenConfig].
func Configure(s Spec, opts *Options) (Config, error) {
	p, ok := providers[s.Provider]
	if !ok {
		return Config{}, fmt.Errorf("%w %q: known providers: %s", ErrUnknownProvider, s.Provider, strings.Join(Providers(), ", "))
	}
	c := Config{Name: s.Name, BaseURL: s.BaseURL}
	if opts != nil {
		c.HTTPClient, c.Logger = opts.HTTPClient, opts.Logger
	}
	if c.BaseURL == "" && p.baseEnv != "" {
		c.BaseURL = opts.getenv(p.baseEnv)
	}
	if c.BaseURL == "" {
		c.BaseURL = p.defaultBase
	}
	for _, k := range p.keyEnv {
		if c.APIKey = opts.getenv(k); c.APIKey != "" {
			break
		}
	}
	if c.APIKey == "" && !p.noKey && !(p.keyOptional && c.BaseURL != "") {
		hint := p.keyEnv[0]
		if len(p.keyEnv) > 1 {
			hint = strings.Join(p.keyEnv, " or ")
		}
		if p.keyOptional {
			hint += ", or " + p.baseEnv + " for a compatible server"
		}
		return Config{}, fmt.Errorf("%w: %s: set %s", model.ErrNoModel, s.Provider+":"+s.Name, hint)
	}
	return c, nil
}

// OpenConfig returns the model of provider configured by c.
func OpenConfig(provider string, c Config) (model.Model, error) {
	p, ok := providers[provider]
	if !ok {
		return nil, fmt.Errorf("%w %q: known providers: %s", ErrUnknownProvider, provider, strings.Join(Providers(), ", "))
	}
	return p.open(c)
}

// About returns one line per provider: its prefix and what it is.
func About() []string {
	var lines []string
	for _, name := range Providers() {
		lines = append(lines, name+": "+providers[name].about)
	}
	return lines
}
