package agent

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/calf-go/calf/agent/internal/engine"
)

// PartialOutput is the payload of an [EventPartialOutput]: the structured
// output as far as the model's answer has streamed.
type PartialOutput struct {
	// JSON is the streamed prefix of the answer made into a JSON value:
	// open strings, arrays and objects closed, and the key, number or
	// literal still being written left out.
	JSON json.RawMessage
	// Value is JSON decoded into the agent's output type Out (a value of
	// type Out, not a pointer): the fields not yet streamed have their zero
	// values.
	Value any
}

// partials turns a typed agent's text deltas into partial outputs: it
// keeps the text of the step being streamed and the last partial yielded.
//
// Each partial decodes the whole text so far, so that a long answer in
// small deltas would cost time in the square of its length: once the
// text is longer than partialEvery bytes, a partial is made when the text
// has grown by a partialEvery-th since the last one, and at the end of the
// step (before the next event of the run) for the text not yet taken.
type partials[Out any] struct {
	a     *Agent[Out]
	run   string
	step  int
	text  strings.Builder
	taken int // the length of the text the last partial was made from
	last  json.RawMessage
}

// partialEvery: see [partials].
const partialEvery = 64

// add takes ev into the text, and returns the partial output event that
// follows it when the output as far as streamed has changed.
func (p *partials[Out]) add(ev Event) (Event, bool) {
	if p.a.output == nil || ev.Agent != p.a.name || ev.Kind != EventDelta || ev.Delta == nil || ev.Delta.Text == "" {
		return Event{}, false
	}
	if ev.RunID != p.run || ev.Step != p.step { // the first text of a step
		p.run, p.step, p.last, p.taken = ev.RunID, ev.Step, nil, 0
		p.text.Reset()
	}
	p.text.WriteString(ev.Delta.Text)
	if n := p.text.Len(); n-p.taken < n/partialEvery {
		return Event{}, false
	}
	return p.make()
}

// flush returns, before the event ev that follows a step's deltas, the
// partial output of the text not yet taken.
func (p *partials[Out]) flush(ev Event) (Event, bool) {
	if p.text.Len() == p.taken || (ev.Kind == EventDelta && ev.Agent == p.a.name && ev.RunID == p.run && ev.Step == p.step) {
		return Event{}, false
	}
	return p.make()
}

// make returns the partial output of the text, if it has changed.
func (p *partials[Out]) make() (Event, bool) {
	p.taken = p.text.Len()
	raw, ok := engine.CompleteJSON(p.text.String())
	if !ok {
		return Event{}, false
	}
	if p.a.output.Wrapped() {
		var err error
		if raw, err = p.a.output.Unwrap(raw); err != nil {
			return Event{}, false // the value has not begun
		}
	}
	if bytes.Equal(raw, p.last) {
		return Event{}, false
	}
	var v Out
	if err := json.Unmarshal(raw, &v); err != nil {
		return Event{}, false
	}
	p.last = raw
	return Event{Kind: EventPartialOutput, Agent: p.a.name, RunID: p.run, Step: p.step, Partial: &PartialOutput{JSON: raw, Value: v}}, true
}
