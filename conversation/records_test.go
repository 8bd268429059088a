package conversation_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/storetest"
)

// setup registers the prototypes of testdata/conversations.yaml in s.
func setup(t *testing.T, s store.Store) *conversation.Conversations {
	t.Helper()
	ps, err := conversation.LoadFile("testdata/conversations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := conversation.NewConversations(s, &conversation.Options{Now: func() time.Time { return time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) }})
	if err := c.Prototypes().RegisterAll(t.Context(), ps, false); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConversationLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := setup(t, s)
		conv, err := c.Create(ctx, conversation.NewConversation{UserID: "u1", Description: "User chat"})
		if err != nil {
			t.Fatal(err)
		}
		if err := convid.CheckConversationID(conv.ID); err != nil {
			t.Fatalf("a new conversation's id: %v", err)
		}
		entry := "conversational-agent-" + conv.ID
		if conv.Entry != entry || conv.Status != conversation.StatusRunning || conv.UserID != "u1" {
			t.Errorf("created %+v", conv)
		}
		// The entry instance and the topic between the user and it.
		insts, err := c.Instances(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(insts) != 1 || insts[0].ID != entry || insts[0].Parent != conversation.UserParticipant || insts[0].Status != conversation.StatusRunning {
			t.Fatalf("instances after Create: %+v", insts)
		}
		ch, err := c.Route(ctx, conv.ID, conversation.UserParticipant, entry)
		if want := "calf.conv." + conv.ID + ".user." + entry; err != nil || ch != want {
			t.Errorf("Route user -> entry: %q, %v; want %q", ch, err, want)
		}
		if err := calf.ValidateChannel(ch); err != nil {
			t.Errorf("the channel is not valid: %v", err)
		}
		// A sub-conversation: the docmem agent, started by the entry.
		dm, err := c.Spawn(ctx, conv.ID, entry, "docmem-agent")
		if err != nil {
			t.Fatal(err)
		}
		if dm.ID != "docmem-agent-"+conv.ID || dm.Parent != entry || dm.Prototype != "docmem-agent" {
			t.Errorf("spawned %+v", dm)
		}
		if _, err := c.Route(ctx, conv.ID, dm.ID, entry); err != nil {
			t.Errorf("Route docmem -> entry: %v", err)
		}
		if _, err := c.Route(ctx, conv.ID, conversation.UserParticipant, dm.ID); !errors.Is(err, conversation.ErrNoTopic) {
			t.Errorf("Route user -> docmem: %v, want ErrNoTopic", err)
		}
		if _, err := c.Spawn(ctx, conv.ID, dm.ID, "conversational-agent"); !errors.Is(err, conversation.ErrNotSubagent) {
			t.Errorf("docmem spawning the conversational agent: %v, want ErrNotSubagent", err)
		}
		topics, err := c.Topics(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(topics) != 2 {
			t.Fatalf("topics: %+v", topics)
		}
		for _, tp := range topics {
			forth, back := tp.Channels()
			if calf.ValidateChannel(forth) != nil || calf.ValidateChannel(back) != nil || len(forth) > 249 {
				t.Errorf("topic %s: channels %q, %q", tp.Name, forth, back)
			}
		}
		// Stop: the conversation and every instance, with the time.
		stopped, err := c.Stop(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stopped.Status != conversation.StatusStopped || stopped.Stopped.IsZero() {
			t.Errorf("stopped: %+v", stopped)
		}
		insts, err = c.Instances(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			if in.Status != conversation.StatusStopped || in.Stopped.IsZero() {
				t.Errorf("instance after Stop: %+v", in)
			}
		}
		if _, err := c.Route(ctx, conv.ID, conversation.UserParticipant, entry); !errors.Is(err, conversation.ErrStopped) {
			t.Errorf("a message to a stopped conversation: %v, want ErrStopped", err)
		}
		if _, err := c.Spawn(ctx, conv.ID, entry, "docmem-agent"); !errors.Is(err, conversation.ErrStopped) {
			t.Errorf("Spawn in a stopped conversation: %v, want ErrStopped", err)
		}
		if _, err := c.Stop(ctx, conv.ID); err != nil {
			t.Errorf("Stop again: %v", err)
		}
		if _, err := c.Stop(ctx, conversation.NewID()); !errors.Is(err, conversation.ErrNotFound) {
			t.Errorf("Stop of an unknown conversation: %v, want ErrNotFound", err)
		}
		list, err := c.List(ctx, "", 0)
		if err != nil || len(list) != 1 || list[0].ID != conv.ID {
			t.Errorf("List: %+v, %v", list, err)
		}
	})
}

func TestCreateErrors(t *testing.T) {
	ctx := t.Context()
	s := stores()["memory"](t)
	c := setup(t, s)
	if _, err := c.Create(ctx, conversation.NewConversation{ID: "not-a-uuid"}); !errors.Is(err, conversation.ErrInvalidID) {
		t.Errorf("Create with a bad id: %v", err)
	}
	id := conversation.NewID()
	a, err := c.Create(ctx, conversation.NewConversation{ID: id, UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, conversation.NewConversation{ID: id, UserID: "u1"})
	if err != nil || b != a {
		t.Errorf("Create again with the same id: %+v, %v; want %+v", b, err, a)
	}
	if _, err := c.Create(ctx, conversation.NewConversation{ID: id, UserID: "u2"}); !errors.Is(err, conversation.ErrExists) {
		t.Errorf("Create with the id of another user's conversation: %v, want ErrExists", err)
	}
	other := conversation.NewConversations(s, &conversation.Options{Entry: "nobody"})
	if _, err := other.Create(ctx, conversation.NewConversation{}); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Create with an unregistered entry prototype: %v, want ErrNotFound", err)
	}
}

// TestSpawnConcurrently has many goroutines start the same instance, from
// two parents: one instance, and one topic per pair.
func TestSpawnConcurrently(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := setup(t, s)
		conv, err := c.Create(ctx, conversation.NewConversation{UserID: "u"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		ids := make([]string, 16)
		errs := make([]error, 16)
		for i := range ids {
			wg.Go(func() {
				in, err := c.Spawn(ctx, conv.ID, conv.Entry, "docmem-agent")
				ids[i], errs[i] = in.ID, err
			})
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil || ids[i] != "docmem-agent-"+conv.ID {
				t.Errorf("creator %d: %q, %v", i, ids[i], errs[i])
			}
		}
		insts, _ := c.Instances(ctx, conv.ID)
		topics, _ := c.Topics(ctx, conv.ID)
		if len(insts) != 2 || len(topics) != 2 {
			t.Errorf("%d instances and %d topics, want 2 and 2", len(insts), len(topics))
		}
		rec, err := s.Get(ctx, "conversation_instance", conv.ID+"/docmem-agent-"+conv.ID)
		if err != nil || rec.Version != 1 {
			t.Errorf("the instance's record: version %d, %v; want written once", rec.Version, err)
		}
	})
}

// TestSpawnOnAFaultyStore retries Spawn on a store that fails writes and
// loses the replies of others: when it succeeds, there is one instance and
// one topic, as after a clean call.
func TestSpawnOnAFaultyStore(t *testing.T) {
	for seed := range uint64(20) {
		ctx := t.Context()
		base := stores()["memory"](t)
		c := setup(t, base)
		conv, err := c.Create(ctx, conversation.NewConversation{UserID: "u"})
		if err != nil {
			t.Fatal(err)
		}
		fs := storetest.WithFaults(base, storetest.Faults{Seed: seed, WriteFailRate: 0.3, LostReplyRate: 0.3, ConcurrentWriteRate: 0.2, ReadFailRate: 0.1})
		fc := conversation.NewConversations(fs, nil)
		var last error
		ok := false
		for range 50 {
			in, err := fc.Spawn(ctx, conv.ID, conv.Entry, "docmem-agent")
			if err == nil {
				ok = in.ID == "docmem-agent-"+conv.ID
				break
			}
			if !errors.Is(err, storetest.ErrInjected) {
				t.Fatalf("seed %d: an error that is no injected fault: %v", seed, err)
			}
			last = err
		}
		if !ok {
			t.Fatalf("seed %d: Spawn never succeeded: %v", seed, last)
		}
		insts, _ := c.Instances(ctx, conv.ID)
		topics, _ := c.Topics(ctx, conv.ID)
		if len(insts) != 2 || len(topics) != 2 {
			t.Errorf("seed %d: %d instances and %d topics, want 2 and 2", seed, len(insts), len(topics))
		}
		if st := fs.Stats(); seed == 0 && st.Fails+st.LostReplies == 0 {
			t.Logf("seed %d injected no write fault", seed)
		}
	}
}

// TestStopRacesSpawn stops conversations while instances are being
// started in them: after both, no instance of a stopped conversation is
// left running.
func TestStopRacesSpawn(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := setup(t, s)
		for range 20 {
			conv, err := c.Create(ctx, conversation.NewConversation{UserID: "u"})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := c.Spawn(ctx, conv.ID, conv.Entry, "docmem-agent"); err != nil && !errors.Is(err, conversation.ErrStopped) {
					t.Errorf("Spawn: %v", err)
				}
			})
			wg.Go(func() {
				if _, err := c.Stop(ctx, conv.ID); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
			wg.Wait()
			insts, err := c.Instances(ctx, conv.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range insts {
				if in.Status == conversation.StatusRunning {
					t.Errorf("instance %s of a stopped conversation runs", in.ID)
				}
			}
		}
	})
}

func TestFailInstance(t *testing.T) {
	ctx := t.Context()
	c := setup(t, stores()["memory"](t))
	conv, err := c.Create(ctx, conversation.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fail(ctx, conv.ID, conv.Entry, "model unreachable"); err != nil {
		t.Fatal(err)
	}
	in, err := c.Instance(ctx, conv.ID, conv.Entry)
	if err != nil || in.Status != conversation.StatusError || in.Error != "model unreachable" {
		t.Errorf("after Fail: %+v, %v", in, err)
	}
	if _, err := c.Stop(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
	if in, _ := c.Instance(ctx, conv.ID, conv.Entry); in.Status != conversation.StatusError {
		t.Errorf("Stop changed a failed instance: %+v", in)
	}
	if err := c.Fail(ctx, conv.ID, "ghost-"+conv.ID, "x"); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Fail of an unknown instance: %v", err)
	}
}

func TestIDs(t *testing.T) {
	id := conversation.NewID()
	if err := convid.CheckConversationID(id); err != nil {
		t.Fatal(err)
	}
	p, conv, ok := convid.SplitInstanceID(convid.InstanceID("docmem-agent", id))
	if !ok || p != "docmem-agent" || conv != id {
		t.Errorf("SplitInstanceID: %q %q %v", p, conv, ok)
	}
	for _, bad := range []string{"", "x", id, "-" + id, "Bad-" + id, "a." + id} {
		if _, _, ok := convid.SplitInstanceID(bad); ok {
			t.Errorf("SplitInstanceID(%q) ok", bad)
		}
	}
	for _, bad := range []string{"", "A", "1a", "a.b", "a b", "a\x00", "user", strings.Repeat("a", convid.MaxNameLen+1)} {
		if err := convid.CheckName(bad); !errors.Is(err, conversation.ErrInvalidName) {
			t.Errorf("CheckName(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", strings.ToUpper(id), strings.Replace(id, "-", "_", 1), id + "0"} {
		if err := convid.CheckConversationID(bad); !errors.Is(err, conversation.ErrInvalidID) {
			t.Errorf("CheckConversationID(%q): %v", bad, err)
		}
	}
	// The longest channel fits a Kafka topic name.
	long := strings.Repeat("a", convid.MaxNameLen)
	ch, err := conversation.Channel(id, convid.InstanceID(long, id), convid.InstanceID(long[1:]+"b", id))
	if err != nil || len(ch) > 249 || calf.ValidateChannel(ch) != nil {
		t.Errorf("the longest channel: %d bytes, %v", len(ch), err)
	}
	if _, err := conversation.Channel(id, "user", "user"); err == nil {
		t.Error("a channel from the user to itself")
	}
	if _, err := conversation.Channel(id, "user", convid.InstanceID("a", conversation.NewID())); err == nil {
		t.Error("a channel to an instance of another conversation")
	}
}

func TestMessageWire(t *testing.T) {
	id := conversation.NewID()
	ts := time.Date(2026, 11, 27, 23, 40, 0, 0, time.UTC)
	user := conversation.ConversationMessage{ConversationID: id, UserID: "u1", Message: "Hello", Timestamp: ts}
	b, err := json.Marshal(user)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"conversation_id":"` + id + `","user_id":"u1","agent_id":null,"message":"Hello","timestamp":"2026-11-27T23:40:00Z"}`
	if string(b) != want {
		t.Errorf("user message:\n got %s\nwant %s", b, want)
	}
	agentMsg := conversation.ConversationMessage{ConversationID: id, AgentID: "conversational-agent-" + id, Message: "", Timestamp: ts, Command: []string{"docmem-create", "project-notes"}, CorrelationID: "c1"}
	b, err = json.Marshal(agentMsg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := conversation.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"user_id":null`) || got.AgentID != agentMsg.AgentID || got.CorrelationID != "c1" || len(got.Command) != 2 || !got.Timestamp.Equal(ts) {
		t.Errorf("agent message round trip: %s -> %+v", b, got)
	}
	for name, m := range map[string]string{
		"not JSON":             `{`,
		"no conversation":      `{"user_id":"u","message":"x","timestamp":"2026-11-27T23:40:00Z"}`,
		"both":                 `{"conversation_id":"` + id + `","user_id":"u","agent_id":"conversational-agent-` + id + `","message":"x","timestamp":"2026-11-27T23:40:00Z"}`,
		"neither":              `{"conversation_id":"` + id + `","user_id":null,"agent_id":null,"message":"x","timestamp":"2026-11-27T23:40:00Z"}`,
		"agent of another":     `{"conversation_id":"` + id + `","agent_id":"conversational-agent-` + conversation.NewID() + `","message":"x","timestamp":"2026-11-27T23:40:00Z"}`,
		"no timestamp":         `{"conversation_id":"` + id + `","user_id":"u","message":"x"}`,
		"timestamp not string": `{"conversation_id":"` + id + `","user_id":"u","message":"x","timestamp":5}`,
	} {
		if _, err := conversation.DecodeMessage([]byte(m)); err == nil {
			t.Errorf("%s: DecodeMessage(%s) succeeded", name, m)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	id := "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f"
	f.Add([]byte(`{"conversation_id":"` + id + `","user_id":"u1","agent_id":null,"message":"Hello","timestamp":"2026-11-27T23:40:00Z"}`))
	f.Add([]byte(`{"conversation_id":"` + id + `","agent_id":"docmem-agent-` + id + `","message":"","timestamp":"2026-11-27T23:40:00Z","command":["a"],"correlation_id":"c"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := conversation.DecodeMessage(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := conversation.DecodeMessage(b)
		if err != nil {
			t.Fatalf("a valid message does not decode after encoding: %v\n%s", err, b)
		}
		if again.ConversationID != m.ConversationID || again.UserID != m.UserID || again.AgentID != m.AgentID || again.Message != m.Message || !again.Timestamp.Equal(m.Timestamp) {
			t.Fatalf("round trip changed the message: %+v -> %+v", m, again)
		}
	})
}

// TestStopOnAFaultyStore retries Stop on a store that fails writes and
// loses replies: once it succeeds, the conversation and every instance
// are stopped.
func TestStopOnAFaultyStore(t *testing.T) {
	for seed := range uint64(10) {
		ctx := t.Context()
		base := stores()["memory"](t)
		c := setup(t, base)
		conv, err := c.Create(ctx, conversation.NewConversation{UserID: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Spawn(ctx, conv.ID, conv.Entry, "docmem-agent"); err != nil {
			t.Fatal(err)
		}
		fs := storetest.WithFaults(base, storetest.Faults{Seed: seed, WriteFailRate: 0.3, LostReplyRate: 0.3, ReadFailRate: 0.1})
		fc := conversation.NewConversations(fs, nil)
		for attempt := 0; ; attempt++ {
			_, err := fc.Stop(ctx, conv.ID)
			if err == nil {
				break
			}
			if !errors.Is(err, storetest.ErrInjected) || attempt > 50 {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		got, _ := c.Get(ctx, conv.ID)
		insts, _ := c.Instances(ctx, conv.ID)
		if got.Status != conversation.StatusStopped || len(insts) != 2 {
			t.Fatalf("seed %d: %+v, %d instances", seed, got, len(insts))
		}
		for _, in := range insts {
			if in.Status != conversation.StatusStopped {
				t.Errorf("seed %d: instance %s is %s", seed, in.ID, in.Status)
			}
		}
	}
}

// TestRestartInstance: Restart brings a failed instance back, leaves a
// running one as it is, and refuses a stopped one or an unknown one.
func TestRestartInstance(t *testing.T) {
	ctx := t.Context()
	c := setup(t, stores()["memory"](t))
	conv, err := c.Create(ctx, conversation.NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := c.Restart(ctx, conv.ID, conv.Entry); err != nil || in.Status != conversation.StatusRunning {
		t.Errorf("Restart of a running instance = %+v, %v", in, err)
	}
	if err := c.Fail(ctx, conv.ID, conv.Entry, strings.Repeat("x", 3*maxErrorLen)); err != nil {
		t.Fatal(err)
	}
	if in, _ := c.Instance(ctx, conv.ID, conv.Entry); len(in.Error) > maxErrorLen+len("…") {
		t.Errorf("a reason of %d bytes recorded", len(in.Error))
	}
	in, err := c.Restart(ctx, conv.ID, conv.Entry)
	if err != nil || in.Status != conversation.StatusRunning || in.Error != "" || in.Stopped != (time.Time{}) {
		t.Errorf("Restart of a failed instance = %+v, %v", in, err)
	}
	if _, err := c.Restart(ctx, conv.ID, "ghost-"+conv.ID); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Restart of an unknown instance: %v", err)
	}
	if _, err := c.Stop(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restart(ctx, conv.ID, conv.Entry); !errors.Is(err, conversation.ErrStopped) {
		t.Errorf("Restart in a stopped conversation: %v", err)
	}
}

// maxErrorLen is the bound of the reason Conversations.Fail records.
const maxErrorLen = 2048
