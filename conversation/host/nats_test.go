package host_test

import (
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestHostStopPurgesChannelsOnNATS: the seed's flow on NATS JetStream
// (embedded), whose consumer groups, private subscriptions (the send's
// wait) and duplicate window the host relies on. The channels are
// subjects of one stream: stopping the conversation purges the stream of
// its channels' messages, which a group that is behind (one prepared on
// every conversation channel that never consumes) kept, and leaves those
// of another conversation; a message sent afterwards is refused.
func TestHostStopPurgesChannelsOnNATS(t *testing.T) {
	b, err := embedded.Open(t.Context(), t.TempDir(), &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.PrepareGroup(t.Context(), "calf.conv.>", "behind"); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect("", natsgo.InProcessServer(b.Server()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// inStream returns how many messages the stream holds on the
	// channels of conversation id.
	inStream := func(id string) uint64 {
		t.Helper()
		st, err := js.Stream(t.Context(), nats.DefaultStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(nats.DefaultPrefix+".*.calf.conv."+id+".>"))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for subj, c := range info.State.Subjects {
			if !strings.Contains(subj, ".calf.conv."+id+".") {
				t.Fatalf("subject %s", subj)
			}
			n += c
		}
		return n
	}

	e := newHost(t, b, storemem.New(), docmemModel(), &host.Options{DeleteChannels: true})
	c, other := e.create(), e.create()
	for _, conv := range []conversation.Conversation{c, other} {
		e.say(conv, "Create a docmem called project-notes")
		if got := e.wait(conv, 1)[0]; got.Message != "I've created the docmem 'project-notes' for you." {
			t.Fatalf("answer %+v", got)
		}
	}
	// The user's message, the entry's answer, and the exchange with the
	// docmem agent, each way.
	if n := inStream(c.ID); n < 4 {
		t.Fatalf("%d messages of the conversation in the stream before the stop", n)
	}
	kept := inStream(other.ID)
	if kept < 4 {
		t.Fatalf("%d messages of the other conversation in the stream before the stop", kept)
	}

	if _, err := e.host.Stop(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	if n := inStream(c.ID); n != 0 {
		t.Errorf("%d messages of the conversation in the stream after the stop", n)
	}
	if n := inStream(other.ID); n != kept {
		t.Errorf("%d messages of the other conversation in the stream after the stop, want %d", n, kept)
	}

	e.say(c, "and now?")
	if got := e.wait(c, 2)[1]; !strings.HasPrefix(got.Message, convid.ErrorPrefix) || !strings.Contains(got.Message, "stopped") {
		t.Fatalf("answer %+v", got)
	}
}
