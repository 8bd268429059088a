package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// searxng emulates a SearXNG instance's JSON API with n results per query.
func searxng(t *testing.T, n int, status int) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		queries = append(queries, r.URL.Query().Get("q")+"|"+r.URL.Query().Get("language"))
		if status != http.StatusOK {
			http.Error(w, "nope", status)
			return
		}
		var out struct {
			Results []map[string]string `json:"results"`
		}
		for i := range n {
			out.Results = append(out.Results, map[string]string{
				"title": fmt.Sprintf("Result\n%d", i), "url": fmt.Sprintf("https://example.com/%d", i), "content": "about  it",
			})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

func TestWebSearchSearXNG(t *testing.T) {
	srv, queries := searxng(t, 20, http.StatusOK)
	p := &builtin.SearXNG{BaseURL: srv.URL, Params: map[string][]string{"language": {"en"}}}
	s, err := builtin.WebSearch(p, &builtin.SearchOptions{MaxResults: 5})
	if err != nil {
		t.Fatal(err)
	}
	if k := tool.KindOf(s); k != tool.KindNetwork {
		t.Errorf("web_search is %q", k)
	}
	out, err := call(t, s, map[string]any{"query": "calf go"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1. Result 0\n   https://example.com/0\n   about it") || !strings.Contains(out, "5. Result 4") || strings.Contains(out, "6. ") {
		t.Errorf("results:\n%s", out)
	}
	if len(*queries) != 1 || (*queries)[0] != "calf go|en" {
		t.Errorf("the instance saw %q", *queries)
	}
	out, err = call(t, s, map[string]any{"query": "calf", "limit": 2})
	if err != nil || !strings.Contains(out, "2. ") || strings.Contains(out, "3. ") {
		t.Errorf("limit 2: %q, %v", out, err)
	}
	if _, err := call(t, s, map[string]any{"query": "  "}); err == nil {
		t.Error("an empty query was sent")
	}
}

// A provider that fails gives the model an error that says why.
func TestWebSearchProviderFails(t *testing.T) {
	forbidden, _ := searxng(t, 0, http.StatusForbidden)
	broken, _ := searxng(t, 0, http.StatusInternalServerError)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") }))
	defer garbage.Close()
	for _, tt := range []struct {
		name string
		p    builtin.SearchProvider
		want string
	}{
		{"json disabled", &builtin.SearXNG{BaseURL: forbidden.URL}, "search.formats"},
		{"server error", &builtin.SearXNG{BaseURL: broken.URL}, "500"},
		{"not json", &builtin.SearXNG{BaseURL: garbage.URL}, "not SearXNG's JSON"},
		{"bad base URL", &builtin.SearXNG{BaseURL: "ftp://x"}, "not an http"},
		{"unreachable", &builtin.SearXNG{BaseURL: "http://127.0.0.1:1"}, "refused"},
		{"function", builtin.SearchFunc(func(context.Context, string, int) ([]builtin.SearchResult, error) {
			return nil, errors.New("quota exceeded")
		}), "quota exceeded"},
		{"slow", builtin.SearchFunc(func(ctx context.Context, _ string, _ int) ([]builtin.SearchResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}), "did not answer within"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := builtin.WebSearch(tt.p, &builtin.SearchOptions{Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			// The agent sends the error back to the model as the
			// tool's error result.
			_, err = s.Call(t.Context(), []byte(`{"query":"x"}`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	if _, err := builtin.WebSearch(nil, nil); err == nil {
		t.Error("WebSearch without a provider succeeded")
	}
}
