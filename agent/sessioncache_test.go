package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/google/go-cmp/cmp"
)

// readCounter counts the reads of a store by kind.
type readCounter struct {
	store.Store
	mu    sync.Mutex
	reads map[string]int
}

func (c *readCounter) count(op, kind string) {
	c.mu.Lock()
	c.reads[op+" "+kind]++
	c.mu.Unlock()
}

func (c *readCounter) Get(ctx context.Context, kind, id string) (store.Record, error) {
	c.count("get", kind)
	return c.Store.Get(ctx, kind, id)
}

func (c *readCounter) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	c.count("list", kind)
	return c.Store.List(ctx, kind, prefix, after, limit)
}

func (c *readCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = map[string]int{}
	return r
}

func texts(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+": "+m.Text())
	}
	return out
}

// A turn of a session that this process ran the last turn of reads the
// session's record twice (at the start, for its history, and to record
// its end) and none of its messages: they are the ones it cached.
func TestSessionTurnReadsOnlyTheRecord(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	counted := &readCounter{Store: st, reads: map[string]int{}}
	rt, a, last := historyAgent(t, memory.New(nil), counted)
	var want []string
	for turn, p := range []string{"hello", "hi again", "and again"} {
		counted.take()
		out, err := a.Run(runCtx(t), rt, p, &agent.RunOptions{SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "user: "+p)
		if diff := cmp.Diff(want, texts(last())); diff != "" {
			t.Errorf("turn %d: the model's request (-want +got):\n%s", turn, diff)
		}
		want = append(want, "assistant: "+out.Output)
		reads := counted.take()
		if turn == 0 {
			continue // the session is created
		}
		wantReads := map[string]int{"get session": 2}
		if diff := cmp.Diff(wantReads, reads); diff != "" {
			t.Errorf("turn %d: the store's reads (-want +got):\n%s", turn, diff)
		}
	}
}

// Another process's turns, a session saved over and a session deleted and
// started again are all seen by the next turn of a process that cached
// the session's messages.
func TestSessionCacheSeesOtherWriters(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rtA, a, lastA := historyAgent(t, memory.New(nil), st)
	rtB, b, _ := historyAgent(t, memory.New(nil), st)
	run := func(rt *agent.Runtime, p string) string {
		t.Helper()
		ag := a
		if rt == rtB {
			ag = b
		}
		out, err := ag.Run(runCtx(t), rt, p, &agent.RunOptions{SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		return out.Output
	}
	check := func(what string, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, texts(lastA())); diff != "" {
			t.Errorf("%s: A's model request (-want +got):\n%s", what, diff)
		}
	}
	a1 := run(rtA, "one")
	b2 := run(rtB, "two")
	run(rtA, "three")
	check("after B's turn", []string{"user: one", "assistant: " + a1, "user: two", "assistant: " + b2, "user: three"})

	// B saves the session over with other messages.
	if err := session.Save(t.Context(), rtB.Store(), &session.Session{ID: "s", Messages: []model.Message{
		{Role: model.RoleUser, Parts: []model.Part{model.TextPart("replaced")}},
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("indeed")}},
	}}); err != nil {
		t.Fatal(err)
	}
	run(rtA, "four")
	check("after B saved the session over", []string{"user: replaced", "assistant: indeed", "user: four"})

	// B deletes it, and starts it again.
	if err := session.Delete(t.Context(), rtB.Store(), "s"); err != nil {
		t.Fatal(err)
	}
	b5 := run(rtB, "five")
	run(rtA, "six")
	check("after B started the session again", []string{"user: five", "assistant: " + b5, "user: six"})
}

// Turns of one session run at once from one process: the session's
// messages as the next turn sees them are those stored, whichever order
// the turns' ends were recorded in.
func TestSessionCacheConcurrentTurns(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, a, last := historyAgent(t, memory.New(nil), st)
	if _, err := a.Run(runCtx(t), rt, "first", &agent.RunOptions{SessionID: "c"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if _, err := a.Run(runCtx(t), rt, fmt.Sprint("at once ", i), &agent.RunOptions{SessionID: "c"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := a.Run(runCtx(t), rt, "last", &agent.RunOptions{SessionID: "c"}); err != nil {
		t.Fatal(err)
	}
	// What another process reads of the session, before the last turn.
	other := agent.NewRuntime(calf.NewClient(memory.New(nil), nil), st, nil)
	s, err := session.Load(t.Context(), other.Store(), "c")
	if err != nil {
		t.Fatal(err)
	}
	stored := texts(s.Messages)
	if len(stored) != 16 {
		t.Fatalf("the session holds %d messages, want 16: %v", len(stored), stored)
	}
	want := append(stored[:14:14], "user: last")
	if diff := cmp.Diff(want, texts(last())); diff != "" {
		t.Errorf("the last turn's request (-want +got):\n%s", diff)
	}
}
