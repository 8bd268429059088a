package engine

import (
	"encoding/json"
	"testing"
)

// CompleteJSON completes every prefix of a JSON document into valid JSON
// that leaves out only what is not yet whole.
func TestCompleteJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{`, `{}`},
		{`  {"ti`, `{}`},
		{`{"title"`, `{}`},
		{`{"title":`, `{}`},
		{`{"title":"The qu`, `{"title":"The qu"}`},
		{`{"title":"a\`, `{"title":"a"}`},
		{`{"title":"a\u00`, `{"title":"a"}`},
		{`{"title":"a\u00e9`, `{"title":"a\u00e9"}`},
		{`{"title":"x","n":12`, `{"title":"x"}`},
		{`{"title":"x","n":12,`, `{"title":"x","n":12}`},
		{`{"ok":tr`, `{}`},
		{`{"ok":true`, `{"ok":true}`},
		{`{"ok":true}`, `{"ok":true}`},
		{`{"tags":["a","b`, `{"tags":["a","b"]}`},
		{`{"tags":[`, `{"tags":[]}`},
		{`{"tags":[],"o":{}`, `{"tags":[],"o":{}}`},
		{`[1,2,`, `[1,2]`},
		{"```json\n{\"a\":\"b", `{"a":"b"}`},
		{`{"a":1} trailing`, `{"a":1}`},
	}
	for _, c := range cases {
		got, ok := CompleteJSON(c.in)
		if !ok || string(got) != c.want {
			t.Errorf("CompleteJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{``, `hello`, `"a string"`, `{x`, `{"a" 1`, `{"a":1]`, `[1 2]`, `{"a":tx`, "```json", `{"a":"x\qy"}`, `{"a":"\u00zz"}`, "{\"a\":\"x\ny\"}"} {
		if got, ok := CompleteJSON(bad); ok {
			t.Errorf("CompleteJSON(%q) = %s, want no value", bad, got)
		}
	}
	// Every prefix of a document completes to valid JSON.
	doc := `{"title":"Caf\u00e9 \"au\" lait","n":-1.5e3,"tags":["x",{"k":[true,false,null]}],"e":{}}`
	for i := 1; i <= len(doc); i++ {
		got, ok := CompleteJSON(doc[:i])
		if !ok || !json.Valid(got) {
			t.Fatalf("prefix %q: %s, %v", doc[:i], got, ok)
		}
	}
	if got, _ := CompleteJSON(doc); string(got) != doc {
		t.Errorf("the whole document completes to %s", got)
	}
}
