package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/teststores"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// sessionStores returns a new, empty store of each kind, each closed (and
// its data dropped) when the test ends.
func sessionStores() map[string]func(t testing.TB) store.Store {
	return teststores.Open("sessions", teststores.Memory, teststores.SQLite, teststores.Postgres, teststores.Redis)
}

// runtimeWith serves an agent "chat" of the model m on a runtime over s
// and an in-memory broker; now, when set, is the runtime's clock.
func runtimeWith(t *testing.T, s store.Store, m model.Model, now func() time.Time) (*agent.Runtime, *agent.Agent[string]) {
	t.Helper()
	mb := memory.New(nil)
	c := calf.NewClient(mb, nil)
	rt := agent.NewRuntime(c, s, &agent.RuntimeOptions{Now: now})
	t.Cleanup(func() {
		_ = c.Close()
		_ = mb.Close()
	})
	a := agent.Must(agent.New("chat", m, nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return rt, a
}

// sessionEnv serves a chat agent on a runtime over s. The model answers
// "reply N" to the N-th message it sees.
func sessionEnv(t *testing.T, s store.Store) (*agent.Runtime, *agent.Agent[string], *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	rt, a := runtimeWith(t, s, modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(fmt.Sprint("reply ", len(req.Messages))), nil
	}), clock.now)
	return rt, a, clock
}

// runCtx bounds a run of a test.
func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The session API on every store: list (paged, newest first), get, title,
// fork, delete, export and import.
func TestSessionsOnEveryStore(t *testing.T) {
	for name, open := range sessionStores() {
		t.Run(name, func(t *testing.T) {
			sessionStore := open(t)
			rt, a, clock := sessionEnv(t, sessionStore)
			ctx := t.Context()
			// Three sessions, a minute apart; the second has two runs.
			for i, id := range []string{"s1", "s2", "s3"} {
				clock.advance(time.Minute)
				if _, err := a.Run(runCtx(t), rt, fmt.Sprintf("Hello from session %d\nmore text", i+1), &agent.RunOptions{SessionID: id}); err != nil {
					t.Fatal(err)
				}
			}
			clock.advance(time.Minute)
			if _, err := a.Run(runCtx(t), rt, "and again", &agent.RunOptions{SessionID: "s2"}); err != nil {
				t.Fatal(err)
			}

			// List: newest first, paged.
			page, err := session.List(ctx, rt.Store(), &session.ListOptions{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(page.Sessions); got != "s3 s2" || page.Next == "" {
				t.Fatalf("first page %s, next %q", got, page.Next)
			}
			s2 := page.Sessions[1]
			if s2.Title != "Hello from session 2" || s2.Messages != 4 || s2.Runs != 2 || s2.Status != session.Idle ||
				s2.Usage.Requests != 2 || !s2.UpdatedAt.After(s2.CreatedAt) {
				t.Errorf("s2 in the list: %+v", s2)
			}
			page, err = session.List(ctx, rt.Store(), &session.ListOptions{Limit: 2, After: page.Next})
			if err != nil || ids(page.Sessions) != "s1" || page.Next != "" {
				t.Fatalf("second page %+v, %v", page, err)
			}
			if _, err := session.List(ctx, rt.Store(), &session.ListOptions{Limit: 1001}); err == nil {
				t.Error("a limit of 1001 was taken")
			}

			// Title.
			if err := session.SetTitle(ctx, rt.Store(), "s1", "Greetings"); err != nil {
				t.Fatal(err)
			}
			if info, err := session.LoadInfo(ctx, rt.Store(), "s1"); err != nil || info.Title != "Greetings" || info.Messages != 2 {
				t.Errorf("s1 after the title: %+v, %v", info, err)
			}
			if err := session.SetTitle(ctx, rt.Store(), "nope", "x"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("title of a missing session: %v", err)
			}

			// Fork from message 2: independent of its parent.
			fork, err := session.Fork(ctx, rt.Store(), "s2", &session.ForkOptions{At: 2, ID: "s2-fork"})
			if err != nil {
				t.Fatal(err)
			}
			if len(fork.Messages) != 2 || fork.ForkedFrom == nil || fork.ForkedFrom.Session != "s2" || fork.Title != "Hello from session 2" {
				t.Fatalf("fork %+v", fork)
			}
			if _, err := a.Run(runCtx(t), rt, "diverge", &agent.RunOptions{SessionID: "s2-fork"}); err != nil {
				t.Fatal(err)
			}
			parent, err := session.Load(ctx, rt.Store(), "s2")
			if err != nil || len(parent.Messages) != 4 || parent.Messages[2].Text() != "and again" {
				t.Fatalf("the parent after the fork's run: %+v, %v", parent, err)
			}
			child, err := session.Load(ctx, rt.Store(), "s2-fork")
			if err != nil || len(child.Messages) != 4 || child.Messages[2].Text() != "diverge" || child.Messages[1].Text() != "reply 1" {
				t.Fatalf("the fork after its run: %+v, %v", child, err)
			}
			if _, err := session.Fork(ctx, rt.Store(), "s2", &session.ForkOptions{ID: "s2-fork"}); !errors.Is(err, session.ErrExists) {
				t.Errorf("a fork onto a taken id: %v", err)
			}
			if _, err := session.Fork(ctx, rt.Store(), "s2", &session.ForkOptions{At: 5}); err == nil {
				t.Error("a fork past the end was made")
			}
			whole, err := session.Fork(ctx, rt.Store(), "s2", nil)
			if err != nil || len(whole.Messages) != 4 || whole.ID == "" || whole.ID == "s2" {
				t.Errorf("a fork of the whole session: %+v, %v", whole, err)
			}

			// Export and import round trip, under another id.
			data, err := session.Export(ctx, rt.Store(), "s2")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), `"format": "calf.session/v1"`) {
				t.Errorf("export without its format:\n%.200s", data)
			}
			imported, err := session.Import(ctx, rt.Store(), data, &session.ImportOptions{ID: "s2-copy"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(parent.Messages, imported.Messages); diff != "" || imported.Title != parent.Title || imported.Usage != parent.Usage {
				t.Errorf("imported session differs (-want +got):\n%s", diff)
			}
			if _, err := session.Import(ctx, rt.Store(), data, nil); !errors.Is(err, session.ErrExists) {
				t.Errorf("an import over s2 without Replace: %v", err)
			}
			if _, err := session.Import(ctx, rt.Store(), data, &session.ImportOptions{ID: "s1", Replace: true}); err != nil {
				t.Fatal(err)
			}
			if s1, err := session.Load(ctx, rt.Store(), "s1"); err != nil || len(s1.Messages) != 4 || s1.Messages[2].Text() != "and again" {
				t.Errorf("s1 replaced by the import: %+v, %v", s1, err)
			}
			// The import continues like any session.
			if _, err := a.Run(runCtx(t), rt, "after the import", &agent.RunOptions{SessionID: "s2-copy"}); err != nil {
				t.Fatal(err)
			}
			if s, err := session.Load(ctx, rt.Store(), "s2-copy"); err != nil || len(s.Messages) != 6 {
				t.Errorf("the imported session after a run: %+v, %v", s, err)
			}

			// Delete.
			if err := session.Delete(ctx, rt.Store(), "s3"); err != nil {
				t.Fatal(err)
			}
			if _, err := session.Load(ctx, rt.Store(), "s3"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a deleted session: %v", err)
			}
			if err := session.Delete(ctx, rt.Store(), "s3"); err != nil {
				t.Errorf("deleting a deleted session: %v", err)
			}
			all, err := session.List(ctx, rt.Store(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(all.Sessions); strings.Contains(got, "s3") || !strings.Contains(got, "s2-copy") || len(all.Sessions) != 5 {
				t.Errorf("sessions after the delete: %s", got)
			}
			if recs, err := sessionStore.List(ctx, "session_messages", "2:s3/", "", 0); err != nil || len(recs) != 0 {
				t.Errorf("the deleted session's messages remain: %d, %v", len(recs), err)
			}
		})
	}
}

func ids(infos []session.Info) string {
	var s []string
	for _, i := range infos {
		s = append(s, i.ID)
	}
	return strings.Join(s, " ")
}

// Imports that are not a session export this version reads are refused
// with clear errors, and store nothing.
func TestImportSessionRefusesBadData(t *testing.T) {
	rt, _, _ := sessionEnv(t, storemem.New())
	for _, tt := range []struct {
		name, data, want string
	}{
		{"not JSON", `{"format": "calf.session/v1", "id": `, "unexpected end"},
		{"no format", `{"id": "x", "messages": []}`, "no format"},
		{"newer format", `{"format": "calf.session/v2", "id": "x", "messages": []}`, `"calf.session/v2" is newer than this version of Calf reads (calf.session/v1)`},
		{"another format", `{"format": "other/v1", "id": "x"}`, "not a session export"},
		{"no id", `{"format": "calf.session/v1", "messages": []}`, "no id"},
		{"unknown field", `{"format": "calf.session/v1", "id": "x", "mesages": []}`, `unknown field "mesages"`},
		{"bad role", `{"format": "calf.session/v1", "id": "x", "messages": [{"role": "wizard"}]}`, `role "wizard"`},
		{"orphan tool result", `{"format": "calf.session/v1", "id": "x", "messages": [{"role": "tool"}]}`, "without its call's id"},
		{"compaction past the end", `{"format": "calf.session/v1", "id": "x", "messages": [], "compacted": {"upto": 3, "messages": []}}`, "stands for 3 messages of 0"},
		{"tool result first", exportOf(`{"role": "tool", "tool_call_id": "c1"}`, `{"role": "user"}`),
			`message 0 is a tool result (call "c1") that follows no assistant message with tool calls`},
		{"tool result after a user message", exportOf(`{"role": "user"}`, `{"role": "tool", "tool_call_id": "c1"}`),
			`message 1 is a tool result (call "c1") that follows no assistant message with tool calls`},
		{"tool result answering no call", exportOf(`{"role": "user"}`, call("c1"), `{"role": "tool", "tool_call_id": "c2"}`),
			`message 2 is a tool result for call "c2", which message 1 (assistant) does not make`},
		{"a call answered twice", exportOf(`{"role": "user"}`, call("c1"), result("c1"), result("c1")),
			`message 3 answers call "c1" of message 1 again`},
		{"a call of an earlier turn", exportOf(`{"role": "user"}`, call("c1"), result("c1"), call("c2"), result("c1")),
			`message 4 is a tool result for call "c1", which message 3 (assistant) does not make`},
		{"unanswered calls at the end", exportOf(`{"role": "user"}`, call("c1", "c2"), result("c2")),
			"message 1 (assistant) makes tool calls that no tool result answers: c1"},
		{"unanswered calls before the next turn", exportOf(`{"role": "user"}`, call("c1"), `{"role": "user"}`, result("c1")),
			"message 1 (assistant) makes tool calls that no tool result answers: c1"},
		{"a call without id", exportOf(`{"role": "user"}`, call("")), `message 1 (assistant) calls "f" without a call id`},
		{"two calls with one id", exportOf(`{"role": "user"}`, call("c1", "c1"), result("c1")), `message 1 (assistant) makes two calls with the id "c1"`},
		{"tool calls of a user message", exportOf(`{"role": "user", "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]}`),
			"message 0 (user) makes tool calls: only assistant messages do"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := session.Import(t.Context(), rt.Store(), []byte(tt.data), nil)
			if !errors.Is(err, session.ErrFormat) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("import: %v; want ErrSessionFormat with %q", err, tt.want)
			}
		})
	}
	if page, err := session.List(t.Context(), rt.Store(), nil); err != nil || len(page.Sessions) != 0 {
		t.Errorf("sessions after refused imports: %+v, %v", page, err)
	}
}

// exportOf returns an export of the session "x" with the messages given as
// JSON objects.
func exportOf(msgs ...string) string {
	return `{"format": "calf.session/v1", "id": "x", "messages": [` + strings.Join(msgs, ", ") + `]}`
}

// call is an assistant message, as JSON, that calls the tool f once per id.
func call(ids ...string) string {
	calls := make([]string, len(ids))
	for i, id := range ids {
		calls[i] = fmt.Sprintf(`{"id": %q, "name": "f", "arguments": "{}"}`, id)
	}
	return `{"role": "assistant", "tool_calls": [` + strings.Join(calls, ", ") + `]}`
}

// result is a tool message, as JSON, that answers the call id.
func result(id string) string {
	return fmt.Sprintf(`{"role": "tool", "tool_call_id": %q, "tool_name": "f", "parts": [{"type": "text", "text": "ok"}]}`, id)
}

// A conversation with tool calls imports when each call is answered, in
// any order, before the next turn; call ids may repeat across turns.
func TestImportSessionAcceptsConversations(t *testing.T) {
	rt, _, _ := sessionEnv(t, storemem.New())
	data := exportOf(`{"role": "system", "parts": [{"type": "text", "text": "be brief"}]}`, `{"role": "user", "parts": [{"type": "text", "text": "hi"}]}`,
		call("c1", "c2"), result("c2"), result("c1"), `{"role": "assistant", "parts": [{"type": "text", "text": "done"}]}`,
		`{"role": "user", "parts": [{"type": "text", "text": "again"}]}`, call("c1"), result("c1"),
		`{"role": "assistant", "parts": [{"type": "text", "text": "done again"}]}`)
	s, err := session.Import(t.Context(), rt.Store(), []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 10 {
		t.Errorf("imported %d messages, want 10", len(s.Messages))
	}
}

// Whatever ImportSession accepts, it exports back equal; whatever it
// refuses, it refuses with ErrSessionFormat; it never panics.
func FuzzImportSession(f *testing.F) {
	f.Add([]byte(exportOf(`{"role": "user", "parts": [{"type": "text", "text": "hi"}]}`, call("c1", "c2"), result("c2"), result("c1"),
		`{"role": "assistant", "parts": [{"type": "text", "text": "done"}]}`)))
	f.Add([]byte(exportOf(`{"role": "tool", "tool_call_id": "c1"}`)))
	f.Add([]byte(exportOf(`{"role": "user"}`, call("c1"))))
	f.Add([]byte(`{"format": "calf.session/v1", "id": "x", "title": "t", "messages": [], "runs": ["r1"], "allowed_tools": ["f"],
		"usage": {"input_tokens": 3}, "compacted": {"upto": 0, "messages": []}, "created_at": "2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"format": "calf.session/v2", "id": "x"}`))
	runtime := func() *agent.Runtime {
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		f.Cleanup(func() {
			_ = c.Close()
			_ = b.Close()
		})
		return agent.NewRuntime(c, storemem.New(), nil)
	}
	first, second := runtime(), runtime()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := session.Import(t.Context(), first.Store(), data, &session.ImportOptions{Replace: true})
		if err != nil {
			if !errors.Is(err, session.ErrFormat) {
				t.Fatalf("import: %v does not match ErrSessionFormat", err)
			}
			return
		}
		out, err := session.Export(t.Context(), first.Store(), s.ID)
		if err != nil {
			t.Fatalf("export of an imported session: %v", err)
		}
		again, err := session.Import(t.Context(), second.Store(), out, &session.ImportOptions{Replace: true})
		if err != nil {
			t.Fatalf("an export does not import: %v\n%s", err, out)
		}
		again.UpdatedAt, s.UpdatedAt = time.Time{}, time.Time{}
		if diff := cmp.Diff(s, again, cmpopts.IgnoreUnexported(session.Session{}), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("imported again (-first +again):\n%s", diff)
		}
	})
}

// A session's status is running while one of its runs is in progress.
func TestSessionStatusWhileRunning(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	rt, a := runtimeWith(t, storemem.New(), modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return modeltest.Text("done"), nil
	}), nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(runCtx(t), rt, "take your time", &agent.RunOptions{SessionID: "busy"})
		done <- err
	}()
	<-started
	info, err := session.LoadInfo(t.Context(), rt.Store(), "busy")
	if err != nil || info.Status != session.Running || info.Title != "take your time" || info.Messages != 0 {
		t.Errorf("a session whose first run is in progress: %+v, %v", info, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if info, err := session.LoadInfo(t.Context(), rt.Store(), "busy"); err != nil || info.Status != session.Idle || info.Messages != 2 {
		t.Errorf("the session after its run: %+v, %v", info, err)
	}
}

// A session stored in the first format (messages in its record) is read,
// and continued in the current one.
func TestSessionOfTheFirstFormat(t *testing.T) {
	s := storemem.New()
	rt, a, _ := sessionEnv(t, s)
	old := `{"id":"old","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]},{"role":"assistant","parts":[{"type":"text","text":"hello"}]}],"runs":["r0"],"allowed_tools":["add"],"updated_at":"2026-01-01T00:00:00Z"}`
	if _, err := s.Put(t.Context(), store.KindSession, "old", []byte(old), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(runCtx(t), rt, "again", &agent.RunOptions{SessionID: "old"}); err != nil {
		t.Fatal(err)
	}
	got, err := session.Load(t.Context(), rt.Store(), "old")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range got.Messages {
		texts = append(texts, m.Text())
	}
	if strings.Join(texts, "|") != "hi|hello|again|reply 3" || len(got.AllowedTools) != 1 {
		t.Errorf("the old session continued: %q, %+v", texts, got)
	}
	data, err := session.Export(t.Context(), rt.Store(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Import(t.Context(), rt.Store(), data, &session.ImportOptions{ID: "old-copy"}); err != nil {
		t.Errorf("the old session's export does not import: %v", err)
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
