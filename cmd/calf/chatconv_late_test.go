package main

import (
	"strings"
	"testing"

	"charm.land/bubbles/v2/textinput"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/model"
)

// TestConvChatDropsDeltasAfterTheAnswer: a delta of the answered run that
// comes after the answer (its channel is another) is not shown under the
// messages, where nothing would ever clear it.
func TestConvChatDropsDeltasAfterTheAnswer(t *testing.T) {
	m := &convChatModel{input: textinput.New(), width: 80, sent: map[string]bool{}}
	delta := func(run, text string) {
		m.Update(convRunEvent{agent.Event{Kind: agent.EventDelta, RunID: run, Delta: &model.Delta{Text: text}}})
	}
	delta("r1", "The note says: w0000")
	if v := m.View().Content; !strings.Contains(v, "w0000") {
		t.Fatalf("the text streamed is not shown live:\n%s", v)
	}
	m.Update(convAnswer{conversation.ConversationMessage{Message: "The note says: w0000 w0001"}})
	delta("r1", " w0001")
	if v := m.View().Content; strings.Contains(v, "w0001") {
		t.Fatalf("a delta after the answer is shown:\n%s", v)
	}
	// The next run's deltas are shown.
	delta("r2", "Next answer")
	if v := m.View().Content; !strings.Contains(v, "Next answer") {
		t.Fatalf("the next run's text is not shown:\n%s", v)
	}
}
