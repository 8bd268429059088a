package server_test

import (
	"regexp"
	"strings"
	"testing"
)

// get returns the body of GET path on the server base, which must be 200.
func get(t *testing.T, base, path string) string {
	t.Helper()
	code, body, _ := do(t, "GET", base+path, "", "", nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %.200s", path, code, body)
	}
	return body
}

// Every element the pages' scripts look up by id ($('…')) is in the page
// the server serves them with, the schedules' list and the follow-ups'
// among them; and the scripts call the endpoints of the schedules and of
// the follow-ups, a firing's run linked to the run view.
func TestWebPagesHaveTheirElements(t *testing.T) {
	hs, _, _ := newServer(t, nil)
	lookup := regexp.MustCompile(`\$\('([A-Za-z0-9_-]+)'\)`)
	common := get(t, hs.URL, "/common.js")
	for _, c := range []struct {
		page, script string
		ids          []string
		calls        []string
	}{
		{"/index.html", "/app.js", []string{"wakebox", "wakeups"}, []string{"'/wakeups'", "'/wakeups/'", "'DELETE'"}},
		{"/inspect.html", "/inspect.js", []string{"schedules"}, []string{"'/v1/schedules'", "'#run=' + encodeURIComponent(f.run_id)", "'resume'", "'pause'", "'trigger'"}},
	} {
		page := get(t, hs.URL, c.page)
		script := get(t, hs.URL, c.script)
		if !strings.Contains(page, `<script src="common.js">`) || !strings.Contains(page, `<script src="`+c.script[1:]+`">`) {
			t.Errorf("%s does not load common.js and %s", c.page, c.script)
		}
		seen := map[string]bool{}
		for _, m := range lookup.FindAllStringSubmatch(common+script, -1) {
			seen[m[1]] = true
			if !strings.Contains(page, `id="`+m[1]+`"`) {
				t.Errorf("%s looks up #%s, which %s lacks", c.script, m[1], c.page)
			}
		}
		for _, id := range c.ids {
			if !seen[id] {
				t.Errorf("%s does not use #%s", c.script, id)
			}
		}
		for _, call := range c.calls {
			if !strings.Contains(script, call) {
				t.Errorf("%s lacks %s", c.script, call)
			}
		}
	}
}
