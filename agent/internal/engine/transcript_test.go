package engine

import (
	"encoding/json"
	"testing"

	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/model"
)

func texts(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

func msgs(ts ...string) []model.Message {
	out := make([]model.Message, len(ts))
	for i, t := range ts {
		out[i] = model.UserMessage(t)
	}
	return out
}

// A transcript's record holds the messages after the history its session
// keeps and after the archived ones; the model sees the compacted
// stand-in for the first.
func TestTranscript(t *testing.T) {
	tr := Transcript{Messages: msgs("h1", "h2", "a1", "a2", "r1"), HistoryLen: 2, History: &HistoryRef{Session: "s"}}
	if tail, ok := tr.Tail(); !ok || len(tail) != 3 || tail[0].Text() != "a1" {
		t.Errorf("tail with a kept history: %v %v", texts(tail), ok)
	}
	if got := texts(tr.NewMessages()); len(got) != 3 || got[0] != "a1" {
		t.Errorf("new messages: %v", got)
	}
	tr.History, tr.Archived = nil, 8
	if _, ok := tr.Tail(); ok {
		t.Error("counts that do not fit the messages are taken")
	}
	tr.Archived = 0
	tr.Compacted = &compaction.Record{Upto: 3, Messages: msgs("summary")}
	if got := texts(tr.View()); len(got) != 3 || got[0] != "summary" || got[1] != "a2" {
		t.Errorf("view: %v", got)
	}
	if !SameCompaction(tr.Compacted, &compaction.Record{Upto: 3, Messages: msgs("other")}) || SameCompaction(tr.Compacted, nil) {
		t.Error("SameCompaction")
	}

	// Decoded from a record that keeps its history apart, it is bare
	// until read back; a history without a session is refused.
	var d Transcript
	if err := json.Unmarshal([]byte(`{"messages":[],"history_len":2,"history":{"session":"s"}}`), &d); err != nil {
		t.Fatal(err)
	}
	if err := d.Decoded(); err != nil || !d.Bare() {
		t.Errorf("decoded with a kept history: %v, bare %v", err, d.Bare())
	}
	d = Transcript{HistoryLen: 2, History: &HistoryRef{}}
	if err := d.Decoded(); err == nil {
		t.Error("a history in no session is taken")
	}
	d = Transcript{Archived: 3}
	if err := d.Decoded(); err == nil {
		t.Error("an archive of 3 messages is taken")
	}
}

// The estimate of a context is the sum of its messages' or, when more,
// the input the model reported for what it saw, plus the messages since.
func TestContextTokens(t *testing.T) {
	one := func(model.Message) int { return 1 }
	m := msgs("a", "b", "c")
	if n := ContextTokens(one, nil, m); n != 3 {
		t.Errorf("no last input: %d", n)
	}
	if n := ContextTokens(one, &InputSize{Tokens: 10, Messages: 2}, m); n != 11 {
		t.Errorf("last input of 10 for 2 messages: %d, want 11", n)
	}
	if n := ContextTokens(one, &InputSize{Tokens: 1, Messages: 2}, m); n != 3 {
		t.Errorf("a last input under the estimate: %d, want 3", n)
	}
}
