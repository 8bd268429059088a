package builtin

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

	"github.com/calf-go/calf/tool"
)

// SearchResult is one result of a web search.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// SearchProvider answers the web_search tool's queries.
type SearchProvider interface {
	// Search returns at most limit results for query.
	Search(ctx context.Context, query string, limit int) ([]SearchResult, error)
}

// SearchFunc is a function that is a [SearchProvider]: a provider of a
// few lines, or a fake in tests.
type SearchFunc func(ctx context.Context, query string, limit int) ([]SearchResult, error)

// Search calls f.
func (f SearchFunc) Search(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	return f(ctx, query, limit)
}

// SearXNG is a [SearchProvider] that queries a SearXNG instance through
// its JSON API, which the instance must enable ("json" among
// search.formats in its settings.yml).
type SearXNG struct {
	// BaseURL is the instance's address, as in http://searxng:8080.
	BaseURL string
	// Client sends the requests. Default: a client with a 15-second
	// timeout.
	Client *http.Client
	// Params are added to each query (language, categories, engines,
	// safesearch, ...).
	Params url.Values
}

// maxSearchResponse bounds the bytes read from a search service.
const maxSearchResponse = 4 << 20

// Search queries the instance.
func (s *SearXNG) Search(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	base, err := url.Parse(s.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("searxng: base URL %q is not an http or https URL", s.BaseURL)
	}
	u := base.JoinPath("search")
	q := url.Values{}
	for k, vs := range s.Params {
		q[k] = vs
	}
	q.Set("q", query)
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("searxng: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchResponse))
	if err != nil {
		return nil, fmt.Errorf("searxng: reading the answer: %v", err)
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("searxng: %s: the instance refuses JSON; add json to search.formats in its settings.yml", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("searxng: %s: %s", resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	var out struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("searxng: the answer is not SearXNG's JSON: %v", err)
	}
	var results []SearchResult
	for _, r := range out.Results {
		if len(results) == limit {
			break
		}
		results = append(results, SearchResult{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return results, nil
}

// DefaultSearchResults is the default of [SearchOptions.MaxResults].
const DefaultSearchResults = 8

// SearchOptions configure the web_search tool. The zero value, like a nil
// *SearchOptions, means the defaults.
type SearchOptions struct {
	// MaxResults bounds the results returned to the model; the model may
	// ask for fewer. Default [DefaultSearchResults].
	MaxResults int
	// Timeout bounds a search. Default 20 seconds.
	Timeout time.Duration
}

type searchArgs struct {
	Query string `json:"query" jsonschema:"what to search the web for"`
	Limit int    `json:"limit,omitempty" jsonschema:"the largest number of results wanted; default and maximum: the tool's"`
}

// WebSearch returns the web_search tool, which searches the web through p
// and returns the results' titles, URLs and snippets. It is of kind
// [tool.KindNetwork]. A provider's failure is an error that says why,
// which an agent sends back to the model as the tool's error result.
func WebSearch(p SearchProvider, opts *SearchOptions) (tool.Tool, error) {
	if p == nil {
		return nil, errors.New("builtin: web_search: no search provider")
	}
	var o SearchOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultSearchResults
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	desc := fmt.Sprintf("Search the web. Returns up to %d results, each a title, a URL and a snippet; "+
		"fetch a page with web_fetch to read it.", o.MaxResults)
	return classify(tool.KindNetwork)(tool.New("web_search", desc, func(ctx context.Context, in searchArgs) (string, error) {
		q := strings.TrimSpace(in.Query)
		if q == "" {
			return "", errors.New("query is empty")
		}
		limit := o.MaxResults
		if in.Limit > 0 {
			limit = min(limit, in.Limit)
		}
		ctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		results, err := p.Search(ctx, q, limit)
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				return "", fmt.Errorf("the search did not answer within %s", o.Timeout)
			}
			return "", fmt.Errorf("the search failed: %v", err)
		}
		if len(results) == 0 {
			return fmt.Sprintf("No results for %q.", q), nil
		}
		var sb strings.Builder
		for i, r := range results[:min(len(results), limit)] {
			fmt.Fprintf(&sb, "%d. %s\n   %s\n", i+1, oneLine(r.Title), r.URL)
			if s := oneLine(r.Snippet); s != "" {
				fmt.Fprintf(&sb, "   %s\n", s)
			}
		}
		return sb.String(), nil
	}))
}

// oneLine returns s with its runs of white space, line breaks included,
// as single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
