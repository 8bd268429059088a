package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
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

// Conversations stored by an earlier version are served by this version's
// host: the message in progress and the one queued behind it when the
// records were taken are answered once each, in order, after Recover; a
// conversation goes on with its history and its tool context; its stored
// document is read by the docmem agent; a message to a stopped
// conversation or a failed instance is refused, and the failed instance
// answers once restarted.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	st := storedStore(t, "conversations")
	const (
		notes    = "0b6f0000-0000-4000-8000-000000000001"
		stopped  = "0b6f0000-0000-4000-8000-000000000002"
		failed   = "0b6f0000-0000-4000-8000-000000000003"
		inFlight = "0b6f0000-0000-4000-8000-000000000004"
	)
	var mu sync.Mutex
	seen := map[string][]string{} // by the last user message, what the model saw before it
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := lastUser(req)
		if strings.Contains(last, "read it back") {
			if res, ok := toolResult(req, "call_read"); ok {
				return modeltest.Text("read: " + res), nil
			}
			args, _ := json.Marshal(map[string]any{"agent": "docmem-agent-" + notes, "command": []string{"docmem-outline", "project-notes"}})
			return modeltest.ToolCalls(modeltest.Call("call_read", "send", string(args))), nil
		}
		var before []string
		for _, msg := range req.Messages[:len(req.Messages)-1] {
			if msg.Role == model.RoleUser || msg.Role == model.RoleAssistant && len(msg.ToolCalls) == 0 {
				before = append(before, msg.Text())
			}
		}
		mu.Lock()
		seen[last] = before
		mu.Unlock()
		return modeltest.Text("answer to " + last), nil
	})
	e := newHost(t, memory.New(nil), st, m, nil)
	get := func(id string) conversation.Conversation {
		t.Helper()
		c, err := e.convs.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The message in progress and the one queued, answered in order.
	if n, err := e.host.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want the in-flight conversation's queue", n, err)
	}
	c4 := get(inFlight)
	got := e.wait(c4, 2)
	if len(got) != 2 || !strings.Contains(got[0].Message, "block me") || !strings.Contains(got[1].Message, "queued") || got[0].AgentID != c4.Entry {
		t.Errorf("the in-flight conversation's answers: %+v", got)
	}
	if cur, q := inboxOf(t, st, c4); cur || q != 0 {
		t.Errorf("the in-flight conversation's inbox after: current %v, %d queued", cur, q)
	}

	// The notes conversation goes on with its history.
	c1 := get(notes)
	e.say(c1, "hello again")
	if got := e.wait(c1, 1)[0]; !strings.Contains(got.Message, "hello again") {
		t.Errorf("the answer in the notes conversation: %+v", got)
	}
	mu.Lock()
	var before []string
	for k, v := range seen {
		if strings.Contains(k, "hello again") {
			before = v
		}
	}
	mu.Unlock()
	if len(before) != 4 || !strings.Contains(before[0], "Create a docmem called project-notes") ||
		before[1] != "I've created the docmem 'project-notes' for you." || !strings.Contains(before[2], "hello") || !strings.HasPrefix(before[3], "Hi! (") {
		t.Errorf("what the model saw before the new message: %q", before)
	}
	calls, err := e.host.ToolContext(ctx, c1.Entry, 0)
	if err != nil || len(calls) != 2 || calls[0].Tool != "start_conversation" || !strings.Contains(calls[0].Arguments, "docmem-agent") ||
		!strings.Contains(calls[0].Result, "docmem-agent-"+notes) || calls[1].Tool != "send" || !strings.Contains(calls[1].Arguments, "docmem-create") ||
		!strings.Contains(calls[1].Result, "project-notes") || calls[0].Run != c1.Entry+".1" {
		t.Errorf("ToolContext(notes) = %+v, %v", calls, err)
	}
	// The stored document, read through the docmem agent.
	e.say(c1, "read it back")
	if got := e.wait(c1, 2)[1]; !strings.HasPrefix(got.Message, "read: ") || !strings.Contains(got.Message, "project-notes") {
		t.Errorf("the stored document read back: %+v", got)
	}
	if res, err := docmem.New(st, nil).Apply(ctx, notes, docmem.Command{Command: docmem.CmdList}); err != nil || len(res.Docs) != 1 || res.Docs[0] != "project-notes" {
		t.Errorf("the notes conversation's documents: %+v, %v", res, err)
	}

	// Refused: a stopped conversation, a failed instance until restarted.
	c2 := get(stopped)
	e.say(c2, "anyone?")
	if got := e.wait(c2, 1)[0]; !got.IsError() || !strings.Contains(got.Message, "stopped") {
		t.Errorf("the answer in the stopped conversation: %+v", got)
	}
	c3 := get(failed)
	e.say(c3, "are you there?")
	if got := e.wait(c3, 1)[0]; !got.IsError() || !strings.Contains(got.Message, "the model is gone") {
		t.Errorf("the answer of the failed instance: %+v", got)
	}
	if i, err := e.host.Restart(ctx, failed, c3.Entry); err != nil || i.Status != conversation.StatusRunning {
		t.Fatalf("Restart = %+v, %v", i, err)
	}
	e.say(c3, "now?")
	if got := e.wait(c3, 2)[1]; got.IsError() || !strings.Contains(got.Message, "now?") {
		t.Errorf("the answer of the restarted instance: %+v", got)
	}
}
