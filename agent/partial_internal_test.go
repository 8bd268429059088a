package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// completeJSON completes every prefix of a JSON document into valid JSON
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
		got, ok := completeJSON(c.in)
		if !ok || string(got) != c.want {
			t.Errorf("completeJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{``, `hello`, `"a string"`, `{x`, `{"a" 1`, `{"a":1]`, `[1 2]`, `{"a":tx`, "```json", `{"a":"x\qy"}`, `{"a":"\u00zz"}`, "{\"a\":\"x\ny\"}"} {
		if got, ok := completeJSON(bad); ok {
			t.Errorf("completeJSON(%q) = %s, want no value", bad, got)
		}
	}
	// Every prefix of a document completes to valid JSON.
	doc := `{"title":"Caf\u00e9 \"au\" lait","n":-1.5e3,"tags":["x",{"k":[true,false,null]}],"e":{}}`
	for i := 1; i <= len(doc); i++ {
		got, ok := completeJSON(doc[:i])
		if !ok || !json.Valid(got) {
			t.Fatalf("prefix %q: %s, %v", doc[:i], got, ok)
		}
	}
	if got, _ := completeJSON(doc); string(got) != doc {
		t.Errorf("the whole document completes to %s", got)
	}
}

// A long answer in small deltas makes a partial output for a fraction of
// them, not each (each decodes the whole text), and the last, made before
// the event after the step, is the whole answer.
func TestPartialsOfALongAnswer(t *testing.T) {
	type item struct {
		Name string `json:"name"`
		Body string `json:"body"`
		N    int    `json:"n"`
	}
	type out struct {
		Items []item `json:"items"`
	}
	var items []item
	for i := range 100 {
		items = append(items, item{fmt.Sprint("item ", i), strings.Repeat("some words here ", 12), i})
	}
	doc, err := json.Marshal(out{items})
	if err != nil {
		t.Fatal(err)
	}
	a := Must(NewTyped[out]("long", modeltest.NewTestModel(), nil))
	p := &partials[out]{a: a}
	var deltas, made int
	var last out
	for i := 0; i < len(doc); i += 4 {
		deltas++
		if ev, ok := p.add(Event{Kind: EventDelta, Agent: "long", RunID: "r", Step: 1, Delta: &model.Delta{Text: string(doc[i:min(i+4, len(doc))])}}); ok {
			made, last = made+1, ev.Partial.Value.(out)
		}
	}
	if _, ok := p.flush(Event{Kind: EventDelta, Agent: "long", RunID: "r", Step: 1}); ok {
		t.Errorf("flushed before a delta of the same step")
	}
	if ev, ok := p.flush(Event{Kind: EventOutput, Agent: "long", RunID: "r", Step: 1}); ok {
		made, last = made+1, ev.Partial.Value.(out)
	}
	if made < 50 || made > deltas/5 {
		t.Errorf("%d partial outputs for %d deltas", made, deltas)
	}
	if got, _ := json.Marshal(last); string(got) != string(doc) {
		t.Errorf("the last partial output is not the answer")
	}
}
