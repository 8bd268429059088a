package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/teststores"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// sessionStores returns a new, empty store of each kind, each closed (and
// its data dropped) when the test ends.
func sessionStores() map[string]func(t testing.TB) store.Store {
	return teststores.Open("sessions", teststores.Memory, teststores.SQLite, teststores.Postgres, teststores.Redis)
}

// sessionEnv serves a chat agent on a runtime over s. The model answers
// "reply N" to the N-th message it sees.
func sessionEnv(t *testing.T, s store.Store) (*agent.Runtime, *agent.Agent[string]) {
	t.Helper()
	mb := memory.New(nil)
	c := calf.NewClient(mb, nil)
	rt := agent.NewRuntime(c, s, nil)
	t.Cleanup(func() {
		_ = c.Close()
		_ = mb.Close()
	})
	a := agent.Must(agent.New("chat", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(fmt.Sprint("reply ", len(req.Messages))), nil
	}), nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return rt, a
}

// historyAgent serves, on a runtime of its own over b and s, an agent that
// answers "ok" to a prompt, calls add (which asks for approval) when the
// prompt starts with "add", and reports the tool's result. It returns the
// runtime and the messages of the model's last request.
func historyAgent(t *testing.T, b calf.Broker, s store.Store) (*agent.Runtime, *agent.Agent[string], func() []model.Message) {
	t.Helper()
	var mu sync.Mutex
	var last []model.Message
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		last = req.Messages
		mu.Unlock()
		msg := req.Messages[len(req.Messages)-1]
		switch {
		case msg.Role == model.RoleTool:
			return modeltest.Text("The result is " + msg.Text()), nil
		case strings.HasPrefix(msg.Text(), "add"):
			return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
		}
		return modeltest.Text(fmt.Sprint("ok ", len(req.Messages))), nil
	})
	a := agent.Must(agent.New("historian", m, &agent.Options{
		Tools: []tool.Tool{add}, Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
	}))
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close() })
	rt := agent.NewRuntime(c, s, nil)
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return rt, a, func() []model.Message {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// storedRun is the stored form of a run, as far as its history goes.
type storedRun struct {
	Messages   []model.Message   `json:"messages"`
	HistoryLen int               `json:"history_len"`
	History    *agent.HistoryRef `json:"history"`
}

// startWaiting runs, from rt, two turns in session s, then a third that
// waits for the approval of its tool call, and returns its approval
// request.
func startWaiting(t *testing.T, rt *agent.Runtime, a *agent.Agent[string]) (approval.Approval, <-chan runResult) {
	t.Helper()
	for _, p := range []string{"hello", "hi again"} {
		if _, err := a.Run(runCtx(t), rt, p, &agent.RunOptions{SessionID: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan runResult, 1)
	go func() {
		out, err := a.Run(runCtx(t), rt, "add 2 and 3", &agent.RunOptions{RunID: "r3", SessionID: "s"})
		done <- runResult{out, err}
	}()
	return pending(t, rt, "r3"), done
}

// A run in a session keeps in its record only its own messages, its
// history being the session's start; a process that never saw the run
// reads the history back from the session and goes on with it.
func TestRunRecordLeavesHistoryInSession(t *testing.T) {
	for name, open := range sessionStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			mb := memory.New(nil)
			t.Cleanup(func() { _ = mb.Close() })
			first, a, _ := historyAgent(t, mb, s)
			caller := agent.NewRuntime(calf.NewClient(mb, nil), s, nil)
			t.Cleanup(func() { _ = caller.Client().Close() })
			req, done := startWaiting(t, caller, a)

			rec, err := s.Get(t.Context(), store.KindRun, "r3")
			if err != nil {
				t.Fatal(err)
			}
			var raw storedRun
			if err := json.Unmarshal(rec.Data, &raw); err != nil {
				t.Fatal(err)
			}
			if len(raw.Messages) != 2 || raw.Messages[0].Text() != "add 2 and 3" || raw.HistoryLen != 4 || raw.History == nil || raw.History.Session != "s" {
				t.Fatalf("stored run: %d messages (first %q), history %d in %+v; want the run's 2 and a history of 4 in session s",
					len(raw.Messages), raw.Messages[0].Text(), raw.HistoryLen, raw.History)
			}
			if st, err := agent.DecodeRunState(rec.Data); err != nil || !st.Bare() || len(st.NewMessages()) != 2 {
				t.Fatalf("decoded record: %+v, %v; want a bare state with the run's 2 messages", st, err)
			}
			st, err := first.LoadState(t.Context(), "r3")
			if err != nil || st.Bare() || len(st.Messages) != 6 || st.Messages[0].Text() != "hello" || len(st.NewMessages()) != 2 {
				t.Fatalf("LoadRun: %+v, %v; want 6 messages from hello", st, err)
			}

			// The first process stops; a second one, which never saw the
			// run, takes the approval and the next model call.
			if err := first.Client().Close(); err != nil {
				t.Fatal(err)
			}
			second, _, last := historyAgent(t, mb, s)
			if _, err := approval.Respond(t.Context(), second.Store(), second.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r := wait(t, done)
			if r.err != nil || r.out.Output != "The result is 5" {
				t.Fatalf("run: %+v, %v", r.out, r.err)
			}
			msgs := last()
			if len(msgs) != 7 || msgs[0].Text() != "hello" || msgs[2].Text() != "hi again" || msgs[6].Role != model.RoleTool {
				t.Fatalf("the second process's model call saw %d messages: %+v", len(msgs), msgs)
			}
			if len(r.out.Thread) != 8 || len(r.out.Messages) != 4 {
				t.Errorf("output: thread of %d messages, %d new; want 8 and 4", len(r.out.Thread), len(r.out.Messages))
			}
			sess, err := session.Load(t.Context(), second.Store(), "s")
			if err != nil || len(sess.Messages) != 8 || sess.Messages[4].Text() != "add 2 and 3" {
				t.Fatalf("session: %+v, %v", sess, err)
			}
		})
	}
}

// A run whose session was replaced while it waited cannot read its
// history back: a process says so, and does not go on with another
// history.
func TestRunHistoryOfReplacedSession(t *testing.T) {
	e := newEnv(t, nil)
	first, a, _ := historyAgent(t, e.broker, e.store)
	startWaiting(t, first, a)
	e.settle(t) // the handler that asked has returned
	if err := session.Save(t.Context(), first.Store(), &session.Session{ID: "s", Messages: []model.Message{model.UserMessage("something else")}}); err != nil {
		t.Fatal(err)
	}
	other := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	t.Cleanup(func() { _ = other.Client().Close() })
	_, err := other.LoadState(t.Context(), "r3")
	if !errors.Is(err, agent.ErrCorruptState) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("LoadRun of a run whose session was replaced: %v", err)
	}
	// Nor does the process that wrote the run: a run waiting for a person
	// is not kept in its cache, so it reads the run as any other would.
	if _, err := first.LoadState(t.Context(), "r3"); !errors.Is(err, agent.ErrCorruptState) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("LoadRun in the first process: %v", err)
	}
	if err := session.Delete(t.Context(), first.Store(), "s"); err != nil {
		t.Fatal(err)
	}
	third := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	t.Cleanup(func() { _ = third.Client().Close() })
	if _, err := third.LoadState(t.Context(), "r3"); !errors.Is(err, agent.ErrCorruptState) || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("LoadRun of a run whose session was deleted: %v", err)
	}
}

// countKind counts the records of kind whose id starts with prefix.
func countKind(t *testing.T, s store.Store, kind, prefix string) int {
	t.Helper()
	recs, err := s.List(t.Context(), kind, prefix, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// A long session's record lists its last parts and runs only, the others
// in chunks; the session reads back whole and in order, forks, exports
// and imports, and is replaced and deleted with its chunks.
func TestLongSessionChunks(t *testing.T) {
	for name, open := range sessionStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			rt, a := sessionEnv(t, s)
			ctx := t.Context()
			const turns = 40
			var runs []string
			for i := range turns {
				out, err := a.Run(runCtx(t), rt, fmt.Sprint("prompt ", i), &agent.RunOptions{SessionID: "long"})
				if err != nil {
					t.Fatal(err)
				}
				runs = append(runs, out.RunID)
			}
			rec, err := s.Get(ctx, store.KindSession, "long")
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Parts, Runs           []string
				PartChunks, RunChunks int `json:"-"`
			}
			if err := json.Unmarshal(rec.Data, &raw); err != nil {
				t.Fatal(err)
			}
			if len(raw.Parts) >= 16 || len(raw.Runs) >= 16 {
				t.Errorf("the session's record lists %d parts and %d runs, want fewer than 16 each", len(raw.Parts), len(raw.Runs))
			}
			if n := countKind(t, s, "session_chunk", "4:long/"); n != 8 {
				t.Errorf("%d chunks stored, want 8 (4 of parts, 4 of runs)", n)
			}
			sess, err := session.Load(ctx, rt.Store(), "long")
			if err != nil {
				t.Fatal(err)
			}
			if len(sess.Messages) != 2*turns || strings.Join(sess.Runs, " ") != strings.Join(runs, " ") {
				t.Fatalf("session: %d messages, runs %v; want %d and %v", len(sess.Messages), sess.Runs, 2*turns, runs)
			}
			for i := range turns {
				if got := sess.Messages[2*i].Text(); got != fmt.Sprint("prompt ", i) {
					t.Fatalf("message %d is %q, want prompt %d", 2*i, got, i)
				}
			}
			if info, err := session.LoadInfo(ctx, rt.Store(), "long"); err != nil || info.Runs != turns || info.Messages != 2*turns {
				t.Errorf("info: %+v, %v", info, err)
			}
			// The next turn sees the whole conversation.
			out, err := a.Run(runCtx(t), rt, "one more", &agent.RunOptions{SessionID: "long"})
			if err != nil || out.Output != fmt.Sprint("reply ", 2*turns+1) {
				t.Fatalf("turn %d: %+v, %v", turns+1, out, err)
			}

			fork, err := session.Fork(ctx, rt.Store(), "long", &session.ForkOptions{At: 10, ID: "fork"})
			if err != nil || len(fork.Messages) != 10 || fork.Messages[8].Text() != "prompt 4" {
				t.Fatalf("fork: %+v, %v", fork, err)
			}
			data, err := session.Export(ctx, rt.Store(), "long")
			if err != nil {
				t.Fatal(err)
			}
			imported, err := session.Import(ctx, rt.Store(), data, &session.ImportOptions{ID: "copy"})
			if err != nil || len(imported.Messages) != 2*turns+2 || len(imported.Runs) != turns+1 || imported.Runs[turns-1] != runs[turns-1] {
				t.Fatalf("import: %d messages, %d runs, %v", len(imported.Messages), len(imported.Runs), err)
			}
			if n := countKind(t, s, "session_chunk", "4:copy/"); n != 4 {
				t.Errorf("the import stored %d chunks, want 4 (of its 41 runs; its messages are one part)", n)
			}

			// Replaced: the old parts and chunks go.
			if err := session.Save(ctx, rt.Store(), &session.Session{ID: "long", Messages: []model.Message{model.UserMessage("anew")}}); err != nil {
				t.Fatal(err)
			}
			if n, m := countKind(t, s, "session_chunk", "4:long/"), countKind(t, s, "session_messages", "4:long/"); n != 0 || m != 1 {
				t.Errorf("after the replacement: %d chunks and %d parts, want 0 and 1", n, m)
			}
			// Deleted: all of it goes.
			if err := session.Delete(ctx, rt.Store(), "copy"); err != nil {
				t.Fatal(err)
			}
			if n, m := countKind(t, s, "session_chunk", "4:copy/"), countKind(t, s, "session_messages", "4:copy/"); n != 0 || m != 0 {
				t.Errorf("after the deletion: %d chunks and %d parts, want none", n, m)
			}
		})
	}
}

// A session stored by an earlier version (format 1: every part and run
// listed in its record) reads back, and takes new runs, its lists moving
// to chunks.
func TestSessionOfFormatOne(t *testing.T) {
	e := newEnv(t, nil)
	rt, a := sessionEnv(t, e.store)
	ctx := t.Context()
	var parts, runs []string
	for i := range 20 {
		id := fmt.Sprintf("run%02d", i)
		data, _ := json.Marshal(map[string]any{"messages": []model.Message{model.UserMessage(fmt.Sprint("old ", i)), model.AssistantMessage("fine")}})
		if _, err := e.store.Put(ctx, "session_messages", "3:old/"+id, data, 0); err != nil {
			t.Fatal(err)
		}
		parts, runs = append(parts, id), append(runs, id)
	}
	data, _ := json.Marshal(map[string]any{"format": 1, "id": "old", "parts": parts, "runs": runs, "count": 40, "usage": model.Usage{}, "cost": model.Cost{}})
	if _, err := e.store.Put(ctx, store.KindSession, "old", data, 0); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), rt, "new", &agent.RunOptions{SessionID: "old"})
	if err != nil || out.Output != "reply 41" {
		t.Fatalf("run in the old session: %+v, %v", out, err)
	}
	sess, err := session.Load(ctx, rt.Store(), "old")
	if err != nil || len(sess.Messages) != 42 || sess.Messages[0].Text() != "old 0" || sess.Messages[40].Text() != "new" || len(sess.Runs) != 21 {
		t.Fatalf("old session: %+v, %v", sess, err)
	}
	if n := countKind(t, e.store, "session_chunk", "3:old/"); n != 2 {
		t.Errorf("%d chunks, want 2 (8 parts and 8 runs moved)", n)
	}
}

// A long run's record keeps its last messages and tool calls only, the
// others archived in chunks: a process that never saw the run reads them
// back and goes on with the whole conversation, the output and the session
// get all of it, and the sweep removes the chunks with the run.
func TestLongRunArchivesMessages(t *testing.T) {
	const steps = 30
	for name, open := range sessionStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			mb := memory.New(nil)
			t.Cleanup(func() { _ = mb.Close() })
			var mu sync.Mutex
			var seen []model.Message
			serve := func() *agent.Runtime {
				add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil }))
				peek := tool.Classify(tool.Must(tool.New("peek", "Read the display.", func(context.Context, addArgs) (string, error) { return "42", nil })), tool.KindRead)
				m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
					mu.Lock()
					seen = req.Messages
					mu.Unlock()
					calls := 0
					for _, m := range req.Messages {
						calls += len(m.ToolCalls)
					}
					switch last := req.Messages[len(req.Messages)-1]; {
					case last.Role == model.RoleUser && last.Text() == "hello":
						return modeltest.Text("hi"), nil
					case calls < steps-1:
						return modeltest.ToolCalls(modeltest.Call(fmt.Sprint("call_", calls+1), "peek", `{"a":1,"b":2}`)), nil
					case calls == steps-1:
						return modeltest.ToolCalls(modeltest.Call(fmt.Sprint("call_", calls+1), "add", `{"a":2,"b":3}`)), nil
					}
					return modeltest.Text(fmt.Sprint("done after ", len(req.Messages))), nil
				})
				a := agent.Must(agent.New("long", m, &agent.Options{
					Tools: []tool.Tool{add, peek}, MaxTurns: steps + 1, Permissions: &agent.Permissions{Mode: agent.PermissionAsk, Allowed: []string{"peek"}},
				}))
				c := calf.NewClient(mb, nil)
				t.Cleanup(func() { _ = c.Close() })
				rt := agent.NewRuntime(c, s, nil)
				if err := a.Serve(t.Context(), rt, nil); err != nil {
					t.Fatal(err)
				}
				return rt
			}
			first := serve()
			caller := agent.NewRuntime(calf.NewClient(mb, nil), s, nil)
			t.Cleanup(func() { _ = caller.Client().Close() })
			chat := agent.Must(agent.New("long", modeltest.NewTestModel(), nil))
			if _, err := chat.Run(runCtx(t), caller, "hello", &agent.RunOptions{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			done := make(chan runResult, 1)
			go func() {
				out, err := chat.Run(runCtx(t), caller, "peek a lot", &agent.RunOptions{RunID: "long-run", SessionID: "s"})
				done <- runResult{out, err}
			}()
			req := pending(t, caller, "long-run")

			rec, err := s.Get(t.Context(), store.KindRun, "long-run")
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Messages      []model.Message        `json:"messages"`
				ToolCalls     []agent.ToolCallRecord `json:"tool_calls"`
				Archived      int                    `json:"archived"`
				ArchivedCalls int                    `json:"archived_calls"`
			}
			if err := json.Unmarshal(rec.Data, &raw); err != nil {
				t.Fatal(err)
			}
			// The run's own messages: the prompt, then a call and a result
			// for each of 29 steps, then the 30th call.
			if len(raw.Messages) >= 16 || len(raw.ToolCalls) >= 16 || raw.Archived+len(raw.Messages) != 2*steps || raw.ArchivedCalls+len(raw.ToolCalls) != steps-1 {
				t.Fatalf("stored run: %d messages and %d archived, %d tool calls and %d archived", len(raw.Messages), raw.Archived, len(raw.ToolCalls), raw.ArchivedCalls)
			}
			if n := countKind(t, s, agent.KindRunMessages, "long-run/"); n != (raw.Archived+raw.ArchivedCalls)/8 {
				t.Errorf("%d chunks stored for %d archived messages and %d tool calls", n, raw.Archived, raw.ArchivedCalls)
			}

			if err := first.Client().Close(); err != nil {
				t.Fatal(err)
			}
			second := serve()
			if _, err := approval.Respond(t.Context(), second.Store(), second.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r := wait(t, done)
			const thread = 2 + 1 + 2*steps + 1 // the history, the prompt, the steps, the answer
			if r.err != nil || r.out.Output != fmt.Sprint("done after ", thread-1) || len(r.out.Thread) != thread || len(r.out.ToolCalls) != steps {
				t.Fatalf("run: %+v, %v", r.out, r.err)
			}
			mu.Lock()
			got := seen
			mu.Unlock()
			if got[0].Text() != "hello" || got[2].Text() != "peek a lot" || got[3].ToolCalls[0].ID != "call_1" || got[thread-2].Role != model.RoleTool {
				t.Errorf("the second process's model call saw %d messages, out of order", len(got))
			}
			for i, c := range r.out.ToolCalls {
				if c.ID != fmt.Sprint("call_", i+1) {
					t.Fatalf("tool call %d is %s", i, c.ID)
				}
			}
			st, err := agent.NewRuntime(calf.NewClient(mb, nil), s, nil).LoadState(t.Context(), "long-run")
			if err != nil || len(st.Messages) != thread || len(st.ToolCalls) != steps || st.Bare() {
				t.Fatalf("LoadRun from a new runtime: %d messages, %d tool calls, %v", len(st.Messages), len(st.ToolCalls), err)
			}
			sess, err := session.Load(t.Context(), second.Store(), "s")
			if err != nil || len(sess.Messages) != thread || sess.Messages[thread-1].Text() != r.out.Output {
				t.Fatalf("session: %d messages, %v", len(sess.Messages), err)
			}

			if _, err := second.Sweep(t.Context(), agent.SweepOptions{Before: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if n := countKind(t, s, agent.KindRunMessages, "long-run/"); n != 0 {
				t.Errorf("%d chunks left after the sweep", n)
			}
		})
	}
}
