// Package modelspec parses the model specs of package model/models
// ("anthropic:claude-sonnet-4-5", a server's URL, a bare name) without
// linking any provider, for the packages that check a spec and open no
// model (conversation's prototypes). Package model/models parses with it
// and opens the model.
package modelspec

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Providers are the prefixes of the providers of model/models, sorted;
// its test checks that they are those of its table.
var Providers = []string{"anthropic", "gemini", "ollama", "openai", "openai-responses"}

// Spec is a parsed model spec.
type Spec struct {
	// Provider is the prefix of the spec ("openai", "anthropic"); a URL
	// spec has "openai".
	Provider string
	// Name is the model's name; empty for a URL spec without one.
	Name string
	// BaseURL is the URL of a URL spec, without its "#NAME" and trailing
	// slash; empty otherwise.
	BaseURL string
}

// Parse parses spec: "PROVIDER:NAME" for a known provider; the base URL of
// an OpenAI-compatible server followed by '#' and the model's name
// ("http://127.0.0.1:8080/v1#qwen2.5"; the name may be left out, for the
// caller to ask the server); or a bare name, an OpenAI model. A bare name
// may hold ':' ("llama3.2:1b"): only a known provider before the first ':'
// is taken as one.
func Parse(spec string) (Spec, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Spec{}, errors.New("models: empty model spec")
	}
	if strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://") {
		base, name, _ := strings.Cut(spec, "#")
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			return Spec{}, fmt.Errorf("models: invalid base URL %q: want http(s)://HOST[:PORT]/PATH, such as http://127.0.0.1:11434/v1", base)
		}
		return Spec{Provider: "openai", BaseURL: strings.TrimRight(base, "/"), Name: strings.TrimSpace(name)}, nil
	}
	if p, name, ok := strings.Cut(spec, ":"); ok {
		if _, known := slices.BinarySearch(Providers, p); known {
			if name == "" {
				return Spec{}, fmt.Errorf("models: %q has no model name after %q", spec, p+":")
			}
			return Spec{Provider: p, Name: name}, nil
		}
	}
	return Spec{Provider: "openai", Name: spec}, nil
}
