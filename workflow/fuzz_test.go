package workflow

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
)

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"3/write", "1/a", "", "/", "0/x", "x/y", "12/", "-1/a", "2/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		step, node, err := parseRef(ref)
		if err != nil {
			return
		}
		if step < 1 || node == "" {
			t.Fatalf("parseRef(%q) = %d, %q", ref, step, node)
		}
		if again, n2, err := parseRef(replyRef(step, node)); err != nil || again != step || n2 != node {
			t.Fatalf("round trip of %q: %d %q %v", ref, again, n2, err)
		}
	})
}

func FuzzDecodeRunInfo(f *testing.F) {
	st := &runState{Workflow: "w", RunID: "r", Status: RunRunning, Position: Position{Step: 2, Node: "a", Visits: map[string]int{"a": 1}},
		State: json.RawMessage(`{"n":1}`), Branches: map[string]*branchState{"x": {Done: true}}}
	data, _ := json.Marshal(st)
	f.Add(data)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"visits":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if info, err := DecodeRunInfo(data); err == nil && (info.ID == "" || info.Workflow == "" || info.Visits == nil) {
			t.Fatalf("accepted %+v", info)
		} else if err != nil && !errors.Is(err, agent.ErrCorruptState) {
			t.Fatalf("error %v does not match ErrCorruptState", err)
		}
		st, err := decodeRunState(data)
		if err != nil {
			return
		}
		if st.Visits == nil {
			t.Fatal("decoded state has nil visits")
		}
		// What decodes encodes and decodes to the same.
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeRunState(again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
