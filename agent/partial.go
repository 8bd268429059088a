package agent

import (
	"encoding/json"

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

// partials turns a typed agent's text deltas, as RunStream yields them,
// into partial output events (see [engine.Partials]); it is nil for an
// agent that answers in text.
type partials struct {
	agent string
	p     *engine.Partials
}

// partials returns the partials of a's stream.
func (a *Agent[Out]) partials() *partials {
	if a.output == nil {
		return nil
	}
	return &partials{a.name, engine.NewPartials(a.output, decodeValue[Out])}
}

// decodeValue decodes v into an Out.
func decodeValue[Out any](v json.RawMessage) (any, error) {
	var out Out
	err := json.Unmarshal(v, &out)
	return out, err
}

// add takes ev into the text, and returns the partial output event that
// follows it when the output as far as streamed has changed.
func (p *partials) add(ev Event) (Event, bool) {
	if p == nil || ev.Agent != p.agent || ev.Kind != EventDelta || ev.Delta == nil || ev.Delta.Text == "" {
		return Event{}, false
	}
	return p.event(p.p.Add(ev.RunID, ev.Step, ev.Delta.Text))
}

// flush returns, before the event ev that follows a step's deltas, the
// partial output of the text not yet taken.
func (p *partials) flush(ev Event) (Event, bool) {
	if p == nil || (ev.Kind == EventDelta && ev.Agent == p.agent && p.p.Streams(ev.RunID, ev.Step)) {
		return Event{}, false
	}
	return p.event(p.p.Flush())
}

// event is the partial output event of part.
func (p *partials) event(part engine.Partial, ok bool) (Event, bool) {
	if !ok {
		return Event{}, false
	}
	return Event{Kind: EventPartialOutput, Agent: p.agent, RunID: part.Run, Step: part.Step, Partial: &PartialOutput{JSON: part.JSON, Value: part.Value}}, true
}
