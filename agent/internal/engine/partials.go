package engine

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/calf-go/calf/tool"
)

// Partials turns the text deltas of a structured output into partial
// outputs: it keeps the text of the step being streamed and the last
// partial made.
//
// Each partial decodes the whole text so far, so that a long answer in
// small deltas would cost time in the square of its length: once the
// text is longer than partialEvery bytes, a partial is made when the text
// has grown by a partialEvery-th since the last one, and at the end of the
// step ([Partials.Flush]) for the text not yet taken.
type Partials struct {
	schema *tool.Schema
	decode func(json.RawMessage) (any, error)
	run    string
	step   int
	text   strings.Builder
	taken  int // the length of the text the last partial was made from
	last   json.RawMessage
}

// A Partial is a structured output as far as it has streamed.
type Partial struct {
	// Run and Step are the run and step whose text it was made from.
	Run  string
	Step int
	// JSON is the streamed prefix made into a JSON value (see
	// [CompleteJSON]), unwrapped when the schema is [tool.Schema.Wrapped].
	JSON json.RawMessage
	// Value is JSON as decoded by the decode function of [NewPartials].
	Value any
}

// partialEvery: see [Partials].
const partialEvery = 64

// NewPartials returns the partials of an output of the given schema (not
// nil), whose prefixes decode turns into values; a prefix decode fails on
// is left out.
func NewPartials(schema *tool.Schema, decode func(json.RawMessage) (any, error)) *Partials {
	return &Partials{schema: schema, decode: decode}
}

// Add takes text, streamed by step of run, and returns the partial that
// follows it when the output as far as streamed has changed.
func (p *Partials) Add(run string, step int, text string) (Partial, bool) {
	if !p.Streams(run, step) { // the first text of a step
		p.run, p.step, p.last, p.taken = run, step, nil, 0
		p.text.Reset()
	}
	p.text.WriteString(text)
	if n := p.text.Len(); n-p.taken < n/partialEvery {
		return Partial{}, false
	}
	return p.make()
}

// Streams reports whether step of run is the step whose text p keeps.
func (p *Partials) Streams(run string, step int) bool {
	return run == p.run && step == p.step
}

// Flush returns the partial of the text not yet taken, if there is one
// and it changes the output.
func (p *Partials) Flush() (Partial, bool) {
	if p.text.Len() == p.taken {
		return Partial{}, false
	}
	return p.make()
}

// make returns the partial of the text, if it has changed.
func (p *Partials) make() (Partial, bool) {
	p.taken = p.text.Len()
	raw, ok := CompleteJSON(p.text.String())
	if !ok {
		return Partial{}, false
	}
	if p.schema.Wrapped() {
		var err error
		if raw, err = p.schema.Unwrap(raw); err != nil {
			return Partial{}, false // the value has not begun
		}
	}
	if bytes.Equal(raw, p.last) {
		return Partial{}, false
	}
	v, err := p.decode(raw)
	if err != nil {
		return Partial{}, false
	}
	p.last = raw
	return Partial{Run: p.run, Step: p.step, JSON: raw, Value: v}, true
}
