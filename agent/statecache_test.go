package agent

import (
	"encoding/json"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func TestStateCache(t *testing.T) {
	c := newStateCache(2)
	st := &runState{RunID: "r", Agent: "a", Status: RunRunning, Step: 1, Phase: phaseTools,
		Messages: make([]model.Message, 1, 8), Pending: []pendingCall{{ID: "c1", Name: "t"}}}
	st.Messages[0] = model.UserMessage("hi")
	data, _ := json.Marshal(st)
	c.put("r", data, 3, st)

	// A hit returns a copy: changing it leaves the cached state alone.
	got, err := c.decode("r", data, 3)
	if err != nil {
		t.Fatal(err)
	}
	got.Messages = append(got.Messages, model.AssistantMessage("changed"))
	got.Pending[0].Result = tool.TextResult("x")
	again, err := c.decode("r", data, 3)
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
	fresh, err := c.decode("r", data2, 0)
	if err != nil || fresh.Step != 7 {
		t.Fatalf("decode of new bytes: %+v, %v", fresh, err)
	}
	// Decoding without a version keeps the cache as it was.
	if latest, rec, ok := c.latest("r"); !ok || rec.Version != 3 || latest.Step != 1 || string(rec.Data) != string(data) {
		t.Fatalf("latest after decoding other bytes without a version: %+v, %+v, %v", latest, rec, ok)
	}
	// latest returns a copy too.
	latest, _, _ := c.latest("r")
	latest.Pending[0].Result = tool.TextResult("x")
	if again, _, _ := c.latest("r"); again.Pending[0].Result != nil {
		t.Fatal("the cached state was changed through a copy from latest")
	}
	// An earlier version does not replace a later one; a later one does.
	c.put("r", data2, 2, &st2)
	if _, rec, _ := c.latest("r"); rec.Version != 3 {
		t.Fatalf("version 2 replaced version 3: latest is at %d", rec.Version)
	}
	if _, err := c.decode("r", data2, 4); err != nil {
		t.Fatal(err)
	}
	if latest, rec, _ := c.latest("r"); rec.Version != 4 || latest.Step != 7 {
		t.Fatalf("after decoding version 4: latest %+v at %d", latest, rec.Version)
	}
	// Bad bytes are an error even for a cached run.
	if _, err := c.decode("r", []byte("{"), 5); err == nil {
		t.Fatal("corrupt bytes decoded")
	}
	// The cache stays within its size, evicting the run used least
	// recently.
	for _, id := range []string{"x", "y", "z"} {
		s := *st
		s.RunID = id
		d, _ := json.Marshal(&s)
		c.put(id, d, 1, &s)
		if id == "y" {
			c.latest("x") // x used after y: y goes when z comes
		}
	}
	if n := c.entries.Len(); n > 2 {
		t.Fatalf("cache holds %d entries, max 2", n)
	}
	if _, _, ok := c.latest("y"); ok {
		t.Error("y is still cached: the run used least recently was not the one evicted")
	}
	if _, _, ok := c.latest("x"); !ok {
		t.Error("x, used after y, was evicted")
	}
}
