package recall_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/recall"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Memories stored by an earlier version are found by this one: the
// vector memory's items by similarity (with their metadata, and refused
// to an embedder of other dimensions), the conversation memory's items
// newest first and its exchanges shown to the next run of their agent;
// and runs of this version add to them.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "memories")
	vec, err := recall.NewVector(s, modeltest.HashEmbedder{Dim: 8}, &recall.VectorOptions{Namespace: "kb", RememberRuns: true, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := recall.NewConversation(s, &recall.ConversationOptions{Namespace: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ms []recall.Match) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return strings.Join(out, ",")
	}

	// The vector memory.
	ms, err := vec.Query(ctx, "Sam drinks green tea every morning.", 1)
	if err != nil || len(ms) != 1 || ms[0].ID != "tea" || ms[0].Text != "Sam drinks green tea every morning." ||
		ms[0].Metadata["topic"] != "habits" || ms[0].Score < 0.999 {
		t.Errorf("Query(the tea item's text) = %+v, %v", ms, err)
	}
	all, err := vec.Query(ctx, "The office is on the fourth floor.", 10)
	if err != nil || len(all) != 5 || all[0].ID != "office" || all[0].Metadata["topic"] != "places" {
		t.Fatalf("Query(the office item's text, 10) = %+v, %v", all, err)
	}
	byID := map[string]recall.Match{}
	for _, m := range all {
		byID[m.ID] = m
	}
	if m := byID["run-run-r1"]; m.Text != "Q: Where is the office?\nA: noted: Where is the office?" || m.Metadata["agent"] != "researcher" ||
		m.Metadata["run"] != "run-r1" || m.Metadata["session"] != "s-run-r1" {
		t.Errorf("a run's exchange: %+v", m)
	}
	if m := byID["95ed1f184ed2ec5e4a6b1ac83f7fe52e"]; m.Text != "The release is due on Friday." {
		t.Errorf("the item without an id: %+v", m)
	}
	other, _ := recall.NewVector(s, modeltest.HashEmbedder{Dim: 16}, &recall.VectorOptions{Namespace: "kb"})
	if _, err := other.Query(ctx, "tea", 1); err == nil || !strings.Contains(err.Error(), "embedded by hash") {
		t.Errorf("a query with an embedder of other dimensions: %v", err)
	}

	// The conversation memory.
	if ms, err := conv.Query(ctx, "", 10); err != nil || ids(ms) != "pinned" || ms[0].Text != "The user prefers short answers." {
		t.Errorf("the default scope: %+v, %v", ms, err)
	}
	msgs, err := conv.UpdateContext(ctx, &agent.MemoryContext{Agent: "helper", Step: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("UpdateContext(helper) = %+v, %v", msgs, err)
	}
	text := msgs[0].Text()
	a, b, c := strings.Index(text, "My name is Ada."), strings.Index(text, "I live in Paris."), strings.Index(text, "I like chess.")
	if !strings.HasPrefix(text, "Earlier exchanges, oldest first:") || a < 0 || b < a || c < b {
		t.Errorf("UpdateContext(helper): %q", text)
	}
	// An item added again keeps its stored time: it stays the oldest.
	if err := conv.Add(ctx, recall.Item{ID: "pinned", Text: "The user prefers short answers."}, recall.Item{ID: "new", Text: "A new item."}); err != nil {
		t.Fatal(err)
	}
	if ms, err := conv.Query(ctx, "", 10); err != nil || ids(ms) != "new,pinned" {
		t.Errorf("the default scope after an add: %q, %v", ids(ms), err)
	}

	// Runs of this version see them and add to them.
	cl := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { cl.Close() })
	rt := agent.NewRuntime(cl, s, nil)
	var shown string
	echo := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		shown = ""
		for _, m := range req.Messages {
			if m.Role == model.RoleSystem {
				shown += m.Text() + "\n"
			}
		}
		return modeltest.Text("noted: " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	helper := agent.Must(agent.New("helper", echo, &agent.Options{Memory: []agent.Memory{conv}}))
	researcher := agent.Must(agent.New("researcher", echo, &agent.Options{Memory: []agent.Memory{vec}}))
	for _, ag := range []*agent.Agent[string]{helper, researcher} {
		if err := ag.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := helper.Run(ctx, rt, "What do I like?", &agent.RunOptions{RunID: "run-h4"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "I like chess.") || !strings.Contains(shown, "My name is Ada.") {
		t.Errorf("what helper's next run was shown: %q", shown)
	}
	if ms, err := conv.UpdateContext(ctx, &agent.MemoryContext{Agent: "helper", Step: 1}); err != nil || len(ms) != 1 || !strings.Contains(ms[0].Text(), "What do I like?") {
		t.Errorf("helper's exchanges after the run: %+v, %v", ms, err)
	}
	if _, err := researcher.Run(ctx, rt, "What does Sam drink?", &agent.RunOptions{RunID: "run-r3"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "Things you remember that may help:") || !strings.Contains(shown, "Q: What does Sam drink?") {
		t.Errorf("what researcher's next run was shown: %q", shown)
	}
	if err := vec.Delete(ctx, "tea"); err != nil {
		t.Fatal(err)
	}
	if all, err := vec.Query(ctx, "tea", 10); err != nil || len(all) != 5 || strings.Contains(","+ids(all)+",", ",tea,") || !strings.Contains(ids(all), "run-run-r3") {
		t.Errorf("the vector memory after a run and a delete: %q, %v", ids(all), err)
	}
}
