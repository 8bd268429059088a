package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
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

type storedArgs struct {
	Text string `json:"text"`
}

// texts joins the texts of msgs with "|", a tool call as "call:NAME".
func texts(msgs []model.Message) string {
	var out []string
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 {
			out = append(out, "call:"+m.ToolCalls[0].Name)
			continue
		}
		out = append(out, m.Text())
	}
	return strings.Join(out, "|")
}

// Sessions stored by an earlier version are read by this one: loaded
// whole (a long one from its chunks), described and listed, exported; an
// earlier export is imported; and they go on: a fork continued by a run
// that sees its history, messages appended, a fork of the long one, the
// paused run of a session resumed to its end, a session deleted.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "sessions")
	load := func(id string) *session.Session {
		t.Helper()
		sess, err := session.Load(ctx, s, id)
		if err != nil {
			t.Fatalf("Load(%s): %v", id, err)
		}
		return sess
	}
	info := func(id string) *session.Info {
		t.Helper()
		i, err := session.LoadInfo(ctx, s, id)
		if err != nil {
			t.Fatalf("LoadInfo(%s): %v", id, err)
		}
		return i
	}

	chat := load("s-chat")
	if chat.ID != "s-chat" || chat.Title != "A chat" || texts(chat.Messages) != "first|saw: first|second|saw: second|third|saw: third" ||
		strings.Join(chat.Runs, ",") != "run-chat-1,run-chat-2,run-chat-3" || len(chat.Active) != 0 || chat.Usage.Requests != 3 ||
		chat.Budget == nil || chat.Budget.MaxModelCalls != 100 || chat.Budget.MaxTokens != 5000 || chat.ForkedFrom != nil ||
		chat.CreatedAt.IsZero() || chat.UpdatedAt.Before(chat.CreatedAt) {
		t.Errorf("s-chat: %+v", chat)
	}
	if i := info("s-chat"); i.Status != session.Idle || i.Messages != 6 || i.Runs != 3 || i.Title != "A chat" || i.Budget == nil || i.Usage.Requests != 3 {
		t.Errorf("s-chat described: %+v", i)
	}
	fork := load("s-fork")
	if fork.Title != "A fork" || fork.ForkedFrom == nil || *fork.ForkedFrom != (session.Origin{Session: "s-chat", Messages: 4}) ||
		texts(fork.Messages) != "first|saw: first|second|saw: second|forked|saw: forked" || strings.Join(fork.Runs, ",") != "run-fork-1" {
		t.Errorf("s-fork: %+v", fork)
	}
	if seeded := load("s-seeded"); seeded.Title != "Seeded" || texts(seeded.Messages) != "hello|hi there|more|noted" || len(seeded.Runs) != 0 {
		t.Errorf("s-seeded: %+v", seeded)
	}
	long := load("s-long")
	if len(long.Messages) != 34 || len(long.Runs) != 17 || long.Title != "turn 1" || long.Messages[0].Text() != "turn 1" ||
		long.Messages[16].Text() != "turn 9" || long.Messages[33].Text() != "saw: turn 17" || long.Runs[0] != "run-long-01" || long.Runs[16] != "run-long-17" {
		t.Errorf("s-long: %d messages, runs %v", len(long.Messages), long.Runs)
	}
	if i := info("s-long"); i.Messages != 34 || i.Runs != 17 {
		t.Errorf("s-long described: %+v", i)
	}
	paused := load("s-paused")
	if texts(paused.Messages) != "before|saw: before" || strings.Join(paused.Active, ",") != "run-paused-2" {
		t.Errorf("s-paused: %+v", paused)
	}
	if i := info("s-paused"); i.Status != session.Paused {
		t.Errorf("s-paused described: %+v", i)
	}

	// Listed newest first, a page at a time.
	var listed []string
	for after := ""; ; {
		page, err := session.List(ctx, s, &session.ListOptions{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range page.Sessions {
			listed = append(listed, i.ID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if strings.Join(listed, ",") != "s-paused,s-long,s-seeded,s-fork,s-chat" {
		t.Errorf("List = %v", listed)
	}

	// Exported now as the earlier version exported it; its export imported.
	data, err := session.Export(ctx, s, "s-chat")
	if err != nil {
		t.Fatal(err)
	}
	earlier, err := os.ReadFile(filepath.Join("testdata", "records", "export.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(data)) != strings.TrimSpace(string(earlier)) {
		t.Errorf("Export(s-chat) differs from the earlier version's export:\n%s\nwant:\n%s", data, earlier)
	}
	imported, err := session.Import(ctx, s, earlier, &session.ImportOptions{ID: "s-imported"})
	if err != nil || imported.ID != "s-imported" || imported.Title != "A chat" || texts(imported.Messages) != texts(chat.Messages) {
		t.Errorf("Import of the earlier export = %+v, %v", imported, err)
	}
	if _, err := session.Import(ctx, s, earlier, nil); !errors.Is(err, session.ErrExists) {
		t.Errorf("Import over the stored s-chat = %v, want ErrExists", err)
	}

	// They go on.
	c := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { c.Close() })
	rt := agent.NewRuntime(c, s, nil)
	var seen string
	echo := tool.Must(tool.New("echo", "Echo.", func(_ context.Context, in storedArgs) (string, error) { return "echo:" + in.Text, nil }))
	agentChat := agent.Must(agent.New("chat", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen = texts(req.Messages[1:])
		return modeltest.Text("saw: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), &agent.Options{Instructions: "Chat.", Tools: []tool.Tool{echo}}))
	if err := agentChat.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := agentChat.Run(ctx, rt, "again", &agent.RunOptions{SessionID: "s-fork"})
	if err != nil || out.Output != "saw: again" || seen != "first|saw: first|second|saw: second|forked|saw: forked|again" {
		t.Errorf("a run continuing s-fork: %+v, %v; the model saw %q", out, err, seen)
	}
	if err := session.Append(ctx, s, "s-seeded", model.UserMessage("appended"), model.AssistantMessage("ok")); err != nil {
		t.Fatal(err)
	}
	if seeded := load("s-seeded"); texts(seeded.Messages) != "hello|hi there|more|noted|appended|ok" {
		t.Errorf("s-seeded after Append: %q", texts(seeded.Messages))
	}
	if f, err := session.Fork(ctx, s, "s-long", &session.ForkOptions{At: 20, ID: "s-long-fork"}); err != nil || len(f.Messages) != 20 ||
		f.Messages[19].Text() != "saw: turn 10" || f.ForkedFrom == nil || f.ForkedFrom.Session != "s-long" {
		t.Errorf("Fork(s-long, 20) = %+v, %v", f, err)
	}
	if err := session.Append(ctx, s, "s-paused", model.UserMessage("x"), model.AssistantMessage("y")); !errors.Is(err, session.ErrBusy) {
		t.Errorf("Append to s-paused, its run paused = %v, want ErrBusy", err)
	}
	if _, err := rt.Resume(ctx, agent.RunRef{Name: "chat", RunID: "run-paused-2"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := agentChat.Wait(wctx, rt, "run-paused-2"); err != nil || out.Output != "saw: echo:hi" {
		t.Errorf("the paused run, resumed: %+v, %v", out, err)
	}
	// The run's end is recorded before its messages join the session.
	const want = "before|saw: before|use the tool|call:echo|echo:hi|saw: echo:hi"
	testwait.Until(t, 10*time.Second, func() bool { return len(load("s-paused").Active) == 0 })
	if p := load("s-paused"); texts(p.Messages) != want || len(p.Active) != 0 ||
		strings.Join(p.Runs, ",") != "run-paused-1,run-paused-2" {
		t.Errorf("s-paused after its run ended: %q, runs %v, active %v", texts(p.Messages), p.Runs, p.Active)
	}
	if err := session.Delete(ctx, s, "s-chat"); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Load(ctx, s, "s-chat"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load(s-chat) after Delete = %v", err)
	}
}
