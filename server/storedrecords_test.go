package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
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

// storedServer serves, on st, agent echo (it answers with the number of
// messages it saw and the last one) and the conversations of
// convPrototypes to ann and bob, as the fixture's server did.
func storedServer(t *testing.T, st store.Store) string {
	t.Helper()
	ctx := t.Context()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	rt := agent.NewRuntime(c, st, nil)
	convs := conversation.NewConversations(st, nil)
	ch := host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return convModel(0), nil },
		Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(st, nil).CodeHandler()},
	})
	if err := ch.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	log := eventlog.New(rt.Client(), st)
	if err := log.Record(ctx, nil); err != nil {
		t.Fatal(err)
	}
	echo := agent.Must(agent.New("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(fmt.Sprintf("%d: %s", len(req.Messages), req.Messages[len(req.Messages)-1].Text())), nil
	}), nil))
	if err := echo.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(rt, []runner.Runner{runner.Agent(echo)}, &server.Options{
		Log: log, Conversations: ch, Tokens: map[string]string{annToken: "ann", bobToken: "bob"}, RateLimit: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordConversations(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// What a server of an earlier version stored is served by this one: the
// owners of sessions and runs keep each user to their own, a session goes
// on for its owner only, and a conversation's user-facing history is read
// and grows from where it was.
func TestStoredRecords(t *testing.T) {
	st := storedStore(t, "served")
	url := storedServer(t, st)
	const (
		annRun1 = "66d30830555637025bfc9a521bd02239"
		annRun2 = "116b5f2ab4577ed8bcf2e77856dc6965"
		bobRun  = "d9670342308affe09c40bf1e8291ede9"
		conv    = "4aca18f1-44d0-4176-b996-93af7c4d23b7"
		entry   = "conversational-agent-" + conv
	)

	// Sessions, each its owner's.
	sessionsOf := func(token string) string {
		t.Helper()
		status, body, _ := do(t, "GET", url+"/v1/sessions", token, "", nil)
		var page struct{ Sessions []session.Info }
		if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
			t.Fatalf("GET /v1/sessions: %d %s", status, body)
		}
		var ids []string
		for _, s := range page.Sessions {
			ids = append(ids, s.ID)
		}
		return strings.Join(ids, ",")
	}
	if got := sessionsOf(annToken); got != "s-ann" {
		t.Errorf("ann's sessions: %q", got)
	}
	if got := sessionsOf(bobToken); got != "s-bob" {
		t.Errorf("bob's sessions: %q", got)
	}
	status, body, _ := do(t, "GET", url+"/v1/sessions/s-ann", annToken, "", nil)
	var sv sessionView
	if err := json.Unmarshal([]byte(body), &sv); status != 200 || err != nil || len(sv.Messages) != 4 || len(sv.Turns) != 2 ||
		sv.Messages[3].Text() != "3: again" || sv.Turns[0].Run != annRun1 || sv.Turns[1].Run != annRun2 {
		t.Errorf("GET /v1/sessions/s-ann as ann: %d %s", status, body)
	}
	if status, body, _ := do(t, "GET", url+"/v1/sessions/s-ann", bobToken, "", nil); status != 404 {
		t.Errorf("GET /v1/sessions/s-ann as bob: %d %s", status, body)
	}

	// Runs, each its starter's.
	for _, r := range []struct {
		id, token string
		status    int
	}{{annRun1, annToken, 200}, {annRun1, bobToken, 404}, {bobRun, bobToken, 200}, {bobRun, annToken, 404}} {
		status, body, _ := do(t, "GET", url+"/v1/runs/"+r.id, r.token, "", nil)
		if status != r.status || status == 200 && !strings.Contains(body, `"complete"`) {
			t.Errorf("GET /v1/runs/%s as %s: %d %s; want %d", r.id, r.token[:3], status, body, r.status)
		}
	}

	// The session goes on for ann, with its history; not for bob.
	chat := func(token, text string) (int, string) {
		body := `{"model":"echo","messages":[{"role":"user","content":"` + text + `"}]}`
		status, resp, _ := do(t, "POST", url+"/v1/chat/completions", token, body, map[string]string{server.SessionHeader: "s-ann"})
		return status, resp
	}
	if status, body := chat(annToken, "third"); status != 200 || !strings.Contains(body, `"5: third"`) {
		t.Errorf("ann continuing s-ann: %d %s; want the model to see its 4 messages and the new one", status, body)
	}
	if status, body := chat(bobToken, "mine now"); status != 404 {
		t.Errorf("bob continuing s-ann: %d %s", status, body)
	}

	// The conversation's history, read and continued.
	v := getConv(t, url, annToken, conv)
	if v.Conversation.UserID != "ann" || v.Conversation.Entry != entry || len(v.Instances) != 2 || len(v.Topics) != 2 || len(v.Messages) != 4 {
		t.Fatalf("the stored conversation: %+v", v)
	}
	want := []struct{ from, to, text string }{
		{"user", entry, "hello there"},
		{entry, "user", "You said: hello there"},
		{"user", entry, "please use docmem"},
		{entry, "user", "The document **project-notes** now reads:"},
	}
	for i, w := range want {
		e := v.Messages[i]
		if e.Seq != int64(i+1) || e.From != w.from || e.To != w.to || !strings.HasPrefix(e.Message, w.text) || e.ID == "" || e.Time.IsZero() || e.Error {
			t.Errorf("history entry %d: %+v", i, e)
		}
	}
	if v.Messages[1].CorrelationID != v.Messages[0].ID || v.Messages[3].CorrelationID != v.Messages[2].ID {
		t.Errorf("the answers' correlation ids: %+v", v.Messages)
	}
	if status, body, _ := do(t, "GET", url+"/v1/conversations/"+conv, bobToken, "", nil); status != 404 {
		t.Errorf("bob reading ann's conversation: %d %s", status, body)
	}
	if status, body, _ := do(t, "POST", url+"/v1/conversations/"+conv+"/messages", annToken, `{"message":"hello again"}`, nil); status != 202 && status != 200 {
		t.Fatalf("a new message: %d %s", status, body)
	}
	got := waitMessages(t, url, annToken, conv, 6)
	if len(got) != 6 || got[4].Seq != 5 || got[4].Message != "hello again" || got[5].Seq != 6 || got[5].Message != "You said: hello again" {
		t.Errorf("the history after a new message: %+v", got[4:])
	}
}
