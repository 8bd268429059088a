package agent

import (
	"encoding/json"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func TestStateCache(t *testing.T) {
	c := newStateCache(2)
	st := &RunState{RunID: "r", Agent: "a", Status: RunRunning, Step: 1, Phase: PhaseTools,
		Messages: make([]model.Message, 1, 8), Pending: []PendingCall{{ID: "c1", Name: "t"}}}
	st.Messages[0] = model.UserMessage("hi")
	data, _ := json.Marshal(st)
	c.put("r", data, st)

	// A hit returns a copy: changing it leaves the cached state alone.
	got, err := c.decode("r", data)
	if err != nil {
		t.Fatal(err)
	}
	got.Messages = append(got.Messages, model.AssistantMessage("changed"))
	got.Pending[0].Result = tool.TextResult("x")
	again, err := c.decode("r", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 1 || again.Pending[0].Result != nil {
		t.Fatalf("the cached state was changed through a copy: %+v", again)
	}
	// Other bytes for the same run are decoded, never served from the cache.
	st2 := *st
	st2.Step = 7
	data2, _ := json.Marshal(&st2)
	fresh, err := c.decode("r", data2)
	if err != nil || fresh.Step != 7 {
		t.Fatalf("decode of new bytes: %+v, %v", fresh, err)
	}
	// Bad bytes are an error even for a cached run.
	if _, err := c.decode("r", []byte("{")); err == nil {
		t.Fatal("corrupt bytes decoded")
	}
	// The cache stays within its size.
	for _, id := range []string{"x", "y", "z"} {
		s := *st
		s.RunID = id
		d, _ := json.Marshal(&s)
		c.put(id, d, &s)
	}
	if n := len(c.entries); n > 2 {
		t.Fatalf("cache holds %d entries, max 2", n)
	}
}
