package agent

import (
	"testing"

	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// A copy made by clone, as the run store's cache makes them, shares
// nothing its holder may change with the original: appending to its
// messages and tool calls, or answering its pending calls.
func TestRunStateClone(t *testing.T) {
	st := &runState{RunID: "r", Agent: "a", Status: RunRunning, Step: 1, Phase: phaseTools,
		Transcript: engine.Transcript{Messages: make([]model.Message, 1, 8)}, ToolCalls: make([]ToolCallRecord, 1, 8), Pending: []pendingCall{{ID: "c1", Name: "t"}}}
	st.Messages[0] = model.UserMessage("hi")
	c := st.clone()
	c.Messages = append(c.Messages, model.AssistantMessage("changed"))
	c.ToolCalls = append(c.ToolCalls, ToolCallRecord{ID: "c0"})
	c.Pending[0].Result = tool.TextResult("x")
	if got := st.Messages[:cap(st.Messages)][1]; got.Role != "" {
		t.Errorf("an append to the copy's messages wrote into the original's: %+v", got)
	}
	if got := st.ToolCalls[:cap(st.ToolCalls)][1]; got.ID != "" {
		t.Errorf("an append to the copy's tool calls wrote into the original's: %+v", got)
	}
	if st.Pending[0].Result != nil {
		t.Error("answering the copy's pending call answered the original's")
	}
}
