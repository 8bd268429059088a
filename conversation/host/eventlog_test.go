package host_test

import (
	"slices"
	"testing"
	"time"

	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/testwait"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestConversationInEventLog: an event log recording with its default
// patterns logs a conversation's messages, the user's and the agents'
// to one another, in the log of the conversation, once each.
func TestConversationInEventLog(t *testing.T) {
	st := storemem.New()
	e := newHost(t, memory.New(nil), st, docmemModel(), nil)
	log := eventlog.New(e.client, st)
	if err := log.Record(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	c := e.create()
	e.say(c, "Create a docmem called project-notes")
	e.wait(c, 1)

	docmem := convid.InstanceID("docmem-agent", c.ID)
	ch := func(from, to string) string {
		s, err := conversation.Channel(c.ID, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := []string{
		ch(conversation.UserParticipant, c.Entry),
		ch(c.Entry, docmem),
		ch(docmem, c.Entry),
		ch(c.Entry, conversation.UserParticipant),
	}
	var got []string
	testwait.For(t, 20*time.Second, "the conversation's messages in its event log", func() bool {
		evs, err := log.Read(t.Context(), c.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, ev := range evs {
			got = append(got, ev.Message.Channel)
		}
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Errorf("the log of conversation %s holds messages on\n%q\nwant\n%q", c.ID, got, want)
	}
}
