package team

import (
	"slices"
	"testing"

	"github.com/calf-go/calf"
)

func orderMsg(id, channel, cause string) *calf.Message {
	return &calf.Message{ID: id, Channel: channel, Metadata: calf.Metadata{CausationID: cause, RunID: "r"}}
}

func ids(ms []*calf.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// The run's output, delivered before the events of a branch it does not
// name as its cause, waits for them; when a held event's cause never
// comes, flush releases the output without it.
func TestCausalOrderLastWaitsForHeld(t *testing.T) {
	last := func(m *calf.Message) bool { return m.Channel == "calf.team.t.output" }
	o := newCausalOrder("r.input", last)
	var got []string
	got = append(got, ids(o.add(orderMsg("r.input", "calf.team.t.input", "")))...)
	// A subagent's start, whose cause (the tool call) travels under
	// another key and comes late, then the output.
	got = append(got, ids(o.add(orderMsg("spawned", "calf.agent.lead.subagent_spawned", "call")))...)
	got = append(got, ids(o.add(orderMsg("r.output", "calf.team.t.output", "r.input")))...)
	if !o.lastHeld() || !slices.Equal(got, []string{"r.input"}) {
		t.Fatalf("before the tool call: released %v, last held %v", got, o.lastHeld())
	}
	got = append(got, ids(o.add(orderMsg("call", "calf.agent.lead.tool_call.papers", "r.input")))...)
	if want := []string{"r.input", "call", "spawned", "r.output"}; !slices.Equal(got, want) {
		t.Errorf("released %v, want %v", got, want)
	}

	o = newCausalOrder("r.input", last)
	o.add(orderMsg("r.input", "calf.team.t.input", ""))
	o.add(orderMsg("orphan", "calf.agent.lead.custom", "never"))
	if out := o.add(orderMsg("r.output", "calf.team.t.output", "r.input")); len(out) != 0 {
		t.Fatalf("the output went before the held event: %v", ids(out))
	}
	if out := ids(o.flush()); !slices.Equal(out, []string{"r.output"}) || o.lastHeld() {
		t.Errorf("flush released %v", out)
	}
}
