package conversation_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/conversation"
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

// Conversations stored by an earlier version are read by this one: the
// conversations, their instances, topics, routes and history, and the
// prototypes; and they go on: a subagent spawned in a running one, a
// failed instance restarted, a conversation stopped.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "conversations")
	convs := conversation.NewConversations(s, nil)
	const (
		notes    = "0b6f0000-0000-4000-8000-000000000001"
		stopped  = "0b6f0000-0000-4000-8000-000000000002"
		failed   = "0b6f0000-0000-4000-8000-000000000003"
		inFlight = "0b6f0000-0000-4000-8000-000000000004"
	)
	entry := func(conv string) string { return "conversational-agent-" + conv }
	docmemID := "docmem-agent-" + notes

	list, err := convs.List(ctx, "", 0)
	if err != nil || len(list) != 4 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for i, want := range []struct {
		id, desc string
		status   conversation.Status
	}{{notes, "Notes", conversation.StatusRunning}, {stopped, "Stopped", conversation.StatusStopped},
		{failed, "Failed", conversation.StatusRunning}, {inFlight, "In flight", conversation.StatusRunning}} {
		c := list[i]
		if c.ID != want.id || c.Description != want.desc || c.Status != want.status || c.UserID != "u1" || c.Entry != entry(want.id) || c.Created.IsZero() ||
			c.Stopped.IsZero() != (want.status == conversation.StatusRunning) {
			t.Errorf("conversation %d: %+v", i, c)
		}
	}
	if _, err := convs.Open(ctx, stopped); !errors.Is(err, conversation.ErrStopped) {
		t.Errorf("Open(stopped) = %v", err)
	}
	if c, err := convs.Open(ctx, notes); err != nil || c.ID != notes {
		t.Errorf("Open(notes) = %+v, %v", c, err)
	}

	insts, err := convs.Instances(ctx, notes)
	if err != nil || len(insts) != 2 {
		t.Fatalf("Instances(notes) = %+v, %v", insts, err)
	}
	if i := insts[0]; i.ID != entry(notes) || i.Prototype != "conversational-agent" || i.Conversation != notes || i.Parent != conversation.UserParticipant ||
		i.Status != conversation.StatusRunning || i.Created.IsZero() {
		t.Errorf("the entry instance: %+v", i)
	}
	if i, err := convs.Instance(ctx, notes, docmemID); err != nil || i.Prototype != "docmem-agent" || i.Parent != entry(notes) || i.Status != conversation.StatusRunning {
		t.Errorf("the docmem instance: %+v, %v", i, err)
	}
	if i, err := convs.Instance(ctx, stopped, entry(stopped)); err != nil || i.Status != conversation.StatusStopped || i.Stopped.IsZero() {
		t.Errorf("the stopped conversation's instance: %+v, %v", i, err)
	}
	if i, err := convs.Instance(ctx, failed, entry(failed)); err != nil || i.Status != conversation.StatusError || i.Error != "the model is gone" {
		t.Errorf("the failed instance: %+v, %v", i, err)
	}

	topics, err := convs.Topics(ctx, notes)
	if err != nil || len(topics) != 2 {
		t.Fatalf("Topics(notes) = %+v, %v", topics, err)
	}
	top, err := convs.Topic(ctx, notes, entry(notes), docmemID)
	if err != nil || top.Participants != [2]string{entry(notes), docmemID} || top.Conversation != notes || top.Created.IsZero() {
		t.Errorf("the topic of the entry and docmem instances: %+v, %v", top, err)
	}
	forth, back := top.Channels()
	if forth != "calf.conv."+notes+"."+entry(notes)+"."+docmemID || back != "calf.conv."+notes+"."+docmemID+"."+entry(notes) {
		t.Errorf("the topic's channels: %s, %s", forth, back)
	}
	if ch, err := convs.Route(ctx, notes, conversation.UserParticipant, entry(notes)); err != nil || ch != "calf.conv."+notes+".user."+entry(notes) {
		t.Errorf("Route(user, entry) = %q, %v", ch, err)
	}
	if _, err := convs.Route(ctx, notes, conversation.UserParticipant, docmemID); !errors.Is(err, conversation.ErrNoTopic) {
		t.Errorf("Route(user, docmem) = %v, want ErrNoTopic", err)
	}
	if _, err := convs.Route(ctx, stopped, conversation.UserParticipant, entry(stopped)); !errors.Is(err, conversation.ErrStopped) {
		t.Errorf("Route in the stopped conversation = %v, want ErrStopped", err)
	}

	// The history of the user's side with the entry instance.
	hist, err := convs.History(ctx, notes)
	if err != nil || len(hist) != 2 {
		t.Fatalf("History(notes) = %+v, %v", hist, err)
	}
	if !strings.Contains(hist[0].Message, "Create a docmem called project-notes") || hist[0].Answer != "I've created the docmem 'project-notes' for you." ||
		!strings.Contains(hist[1].Message, "hello") || !strings.HasPrefix(hist[1].Answer, "Hi! (") {
		t.Errorf("History(notes) = %+v", hist)
	}
	if hist, err := convs.History(ctx, inFlight); err != nil || len(hist) != 0 {
		t.Errorf("History(in flight) = %+v, %v; want none, its message not answered", hist, err)
	}

	// The prototypes.
	protos, err := convs.Prototypes().List(ctx)
	if err != nil || len(protos) != 3 {
		t.Fatalf("Prototypes = %+v, %v", protos, err)
	}
	p, err := convs.Prototypes().Get(ctx, "conversational-agent")
	if err != nil || p.Kind != conversation.KindLLM || p.Role != "Orchestrator" || p.SystemPrompt != "You talk with the user." ||
		strings.Join(p.Subagents, ",") != "docmem-agent,ext-agent" || p.Permissions == nil || p.Permissions.Mode != "accept_reads" {
		t.Errorf("the conversational agent's prototype: %+v, %v", p, err)
	}
	if p, err := convs.Prototypes().Get(ctx, "ext-agent"); err != nil || p.Kind != conversation.KindExternal {
		t.Errorf("the external prototype: %+v, %v", p, err)
	}
	if err := conversation.ValidateSet(protos); err != nil {
		t.Errorf("the stored prototypes do not validate: %v", err)
	}

	// They go on.
	ext, err := convs.Spawn(ctx, notes, entry(notes), "ext-agent")
	if err != nil || ext.ID != "ext-agent-"+notes || ext.Parent != entry(notes) {
		t.Fatalf("Spawn(ext-agent) = %+v, %v", ext, err)
	}
	if again, err := convs.Spawn(ctx, notes, entry(notes), "docmem-agent"); err != nil || again.ID != docmemID || !again.Created.Equal(insts[1].Created) {
		t.Errorf("Spawn of the stored docmem instance = %+v, %v; want the stored one", again, err)
	}
	if topics, err := convs.Topics(ctx, notes); err != nil || len(topics) != 3 {
		t.Errorf("Topics after the spawn: %+v, %v", topics, err)
	}
	if _, err := convs.Spawn(ctx, stopped, entry(stopped), "docmem-agent"); !errors.Is(err, conversation.ErrStopped) {
		t.Errorf("Spawn in the stopped conversation = %v", err)
	}
	if i, err := convs.Restart(ctx, failed, entry(failed)); err != nil || i.Status != conversation.StatusRunning || i.Error != "" {
		t.Errorf("Restart of the failed instance = %+v, %v", i, err)
	}
	c, err := convs.Stop(ctx, notes)
	if err != nil || c.Status != conversation.StatusStopped || c.Stopped.IsZero() {
		t.Fatalf("Stop(notes) = %+v, %v", c, err)
	}
	insts, err = convs.Instances(ctx, notes)
	if err != nil || len(insts) != 3 {
		t.Fatalf("Instances after the stop: %+v, %v", insts, err)
	}
	for _, i := range insts {
		if i.Status != conversation.StatusStopped {
			t.Errorf("instance after the stop: %+v", i)
		}
	}
}
