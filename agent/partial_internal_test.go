package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

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
	p := a.partials()
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
