package recall_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/recall"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

func runtime(t *testing.T) (*agent.Runtime, store.Store) {
	t.Helper()
	b, s := memory.New(nil), storemem.New()
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = s.Close() })
	return agent.NewRuntime(c, s, nil), s
}

// recorder is a model that records the requests it gets and answers
// "noted".
type recorder struct {
	mu       sync.Mutex
	requests []*model.Request
}

func (r *recorder) model() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		r.mu.Lock()
		r.requests = append(r.requests, req)
		r.mu.Unlock()
		return modeltest.Text("noted"), nil
	}
}

func (r *recorder) last() *model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[len(r.requests)-1]
}

// UpdateContext injects the top-k matches of the user's question, with
// embeddings from an OpenAI-compatible endpoint (a fake server here).
func TestVectorMemoryInjectsTopMatches(t *testing.T) {
	srv := modeltest.NewServer(nil)
	defer srv.Close()
	emb, err := openai.NewEmbedder(openai.Options{Model: "text-embedding-3-small", BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	rt, s := runtime(t)
	mem, err := recall.NewVector(s, emb, &recall.VectorOptions{K: 2})
	if err != nil {
		t.Fatal(err)
	}
	facts := []string{
		"The office cat is named Biscuit and sleeps on the printer.",
		"The printer on the third floor jams on glossy paper.",
		"Quarterly revenue grew by twelve percent.",
		"The cafeteria serves soup on Fridays.",
		"Biscuit the cat likes tuna.",
	}
	for _, f := range facts {
		if err := mem.Add(t.Context(), recall.Item{Text: f}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.Add(t.Context(), recall.Item{}); !errors.Is(err, recall.ErrEmpty) {
		t.Errorf("an empty item: %v", err)
	}
	matches, err := mem.Query(t.Context(), "what does the cat Biscuit like", 2)
	if err != nil || len(matches) != 2 || !strings.Contains(matches[0].Text, "Biscuit") || !strings.Contains(matches[1].Text, "Biscuit") || matches[0].Score < matches[1].Score {
		t.Fatalf("query: %+v, %v", matches, err)
	}

	rec := &recorder{}
	a := agent.Must(agent.New("assistant", rec.model(), &agent.Options{
		Instructions: "Be helpful.", Memory: []agent.Memory{mem},
	}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(t.Context(), rt, "What does the cat Biscuit like to eat?", nil); err != nil {
		t.Fatal(err)
	}
	req := rec.last()
	if len(req.Messages) != 3 || req.Messages[0].Text() != "Be helpful." || req.Messages[1].Role != model.RoleSystem || req.Messages[2].Role != model.RoleUser {
		t.Fatalf("request messages: %+v", req.Messages)
	}
	injected := req.Messages[1].Text()
	if !strings.HasPrefix(injected, "Things you remember that may help:") || !strings.Contains(injected, "likes tuna") || !strings.Contains(injected, "named Biscuit") ||
		strings.Contains(injected, "revenue") || strings.Contains(injected, "soup") || strings.Count(injected, "\n- ") != 2 {
		t.Errorf("injected:\n%s", injected)
	}
	// What the memory added is not part of the run's conversation.
	out, err := a.Run(t.Context(), rt, "And the printer?", &agent.RunOptions{RunID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Thread {
		if m.Role == model.RoleSystem {
			t.Errorf("the memory's message was recorded: %q", m.Text())
		}
	}
}

// A memory that fails does not fail the run; a memory filled by another
// embedder is refused with a clear error.
func TestVectorMemoryFailures(t *testing.T) {
	rt, s := runtime(t)
	mem, err := recall.NewVector(s, modeltest.HashEmbedder{Dim: 8}, &recall.VectorOptions{Namespace: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Add(t.Context(), recall.Item{ID: "a", Text: "alpha"}); err != nil {
		t.Fatal(err)
	}
	other, _ := recall.NewVector(s, modeltest.HashEmbedder{Dim: 16}, &recall.VectorOptions{Namespace: "n"})
	if _, err := other.Query(t.Context(), "alpha", 1); err == nil || !strings.Contains(err.Error(), "8 dimensions and the query 16") {
		t.Errorf("mixed embedders: %v", err)
	}
	rec := &recorder{}
	a := agent.Must(agent.New("assistant", rec.model(), &agent.Options{Memory: []agent.Memory{other}}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run(t.Context(), rt, "alpha?", nil); err != nil || out.Output != "noted" || len(rec.last().Messages) != 1 {
		t.Errorf("a failing memory: %+v, %v", out, err)
	}
	if _, err := recall.NewVector(s, modeltest.HashEmbedder{}, &recall.VectorOptions{Namespace: "a/b"}); err == nil {
		t.Error("a namespace with '/' was taken")
	}
}

// A conversation memory remembers each completed run's exchange, per
// scope, and the next runs of the scope see the latest, oldest first.
func TestConversationMemory(t *testing.T) {
	rt, s := runtime(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	mem, err := recall.NewConversation(s, &recall.ConversationOptions{
		K: 2, Keep: 3, Now: clock,
		Scope: func(in *agent.MemoryContext) string { return strings.SplitN(in.SessionID, "-", 2)[0] }, // "alice-1" → alice
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a := agent.Must(agent.New("assistant", rec.model(), &agent.Options{Memory: []agent.Memory{mem}}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"my name is Alice", "I live in Lyon", "I like tea", "I work at night"} {
		if _, err := a.Run(t.Context(), rt, p, &agent.RunOptions{SessionID: "alice-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Run(t.Context(), rt, "what do you know?", &agent.RunOptions{SessionID: "alice-z"}); err != nil {
		t.Fatal(err)
	}
	injected := rec.last().Messages[0].Text()
	if !strings.Contains(injected, "Q: I like tea\n  A: noted") || !strings.Contains(injected, "Q: I work at night") ||
		strings.Index(injected, "tea") > strings.Index(injected, "night") || strings.Contains(injected, "Lyon") {
		t.Errorf("alice's run saw:\n%s", injected)
	}
	if _, err := a.Run(t.Context(), rt, "hello", &agent.RunOptions{SessionID: "bob-1"}); err != nil {
		t.Fatal(err)
	}
	if m := rec.last().Messages; len(m) != 1 {
		t.Errorf("bob's first run saw alice's exchanges: %q", m[0].Text())
	}
	// Keep 3: the oldest of alice's four (five with the last) are gone.
	recs, err := s.List(t.Context(), recall.KindConversation, "default/alice/", "", 0)
	if err != nil || len(recs) != 3 {
		t.Errorf("alice's items: %d, %v", len(recs), err)
	}
	if err := mem.Add(t.Context(), recall.Item{Text: "a note"}); err != nil {
		t.Fatal(err)
	}
	if ms, err := mem.Query(t.Context(), "NOTE", 5); err != nil || len(ms) != 1 {
		t.Errorf("query: %+v, %v", ms, err)
	}
}
