package nats

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

// channelCounts returns how many messages b's stream holds on each
// channel, over every partition.
func channelCounts(t *testing.T, b *Broker) map[string]uint64 {
	t.Helper()
	info, err := b.st.Info(t.Context(), jetstream.WithSubjectFilter(b.opts.Prefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		ch, err := channelOf(b.opts.Prefix, subj)
		if err != nil {
			t.Fatal(err)
		}
		counts[ch] += n
	}
	return counts
}

// TestDeleteChannelsPurgesTheirMessages checks that deleting a channel
// removes its messages from the stream in every partition, and only
// its: channels that share its first tokens, that it is a prefix of or
// that end with it keep theirs.
func TestDeleteChannelsPurgesTheirMessages(t *testing.T) {
	backends(t, func(t *testing.T, open func() *Broker) {
		b := open()
		// A group that keeps every message until it handles it, which it
		// never does: the stream keeps only what a group matches.
		if err := b.PrepareGroup(t.Context(), ">", "keep"); err != nil {
			t.Fatal(err)
		}
		channels := []string{"del.a.b", "del.a.b.c", "del.a.bc", "del.a", "x.del.a.b", "del.a.b.del.a.b"}
		want := map[string]uint64{}
		for _, ch := range channels {
			// Keys enough to spread over several partitions.
			for i := range 8 {
				publish(t, b, msg(ch, fmt.Sprint("k", i), fmt.Sprintf("%s-%d", ch, i)))
			}
			want[ch] = 8
		}
		if p0, p1 := Partition("k0", "", b.opts.Partitions), Partition("k1", "", b.opts.Partitions); p0 == p1 {
			t.Fatalf("keys k0 and k1 share partition %d", p0)
		}
		if diff := cmp.Diff(want, channelCounts(t, b)); diff != "" {
			t.Fatalf("messages before the deletion (-want +got):\n%s", diff)
		}

		// A channel without messages is no error.
		if err := b.DeleteChannels(t.Context(), "del.a.b", "del.none"); err != nil {
			t.Fatal(err)
		}
		delete(want, "del.a.b")
		if diff := cmp.Diff(want, channelCounts(t, b)); diff != "" {
			t.Errorf("messages after deleting del.a.b (-want +got):\n%s", diff)
		}

		if err := b.DeleteChannels(t.Context(), "del.a"); err != nil {
			t.Fatal(err)
		}
		delete(want, "del.a")
		if diff := cmp.Diff(want, channelCounts(t, b)); diff != "" {
			t.Errorf("messages after deleting del.a (-want +got):\n%s", diff)
		}

		// A channel deleted takes messages again.
		publish(t, b, msg("del.a.b", "k0", "again"))
		want["del.a.b"] = 1
		if diff := cmp.Diff(want, channelCounts(t, b)); diff != "" {
			t.Errorf("messages after publishing again (-want +got):\n%s", diff)
		}
	})
}

// TestDeleteChannelsRefusesInvalidNames checks that an invalid channel
// fails the call before anything is purged.
func TestDeleteChannelsRefusesInvalidNames(t *testing.T) {
	natsURL(t)
	b := openExternal(t, testOptions())
	if err := b.PrepareGroup(t.Context(), ">", "keep"); err != nil {
		t.Fatal(err)
	}
	publish(t, b, msg("inv.a", "k", "m"))
	for _, bad := range []string{"", "inv.*", "inv.>", "inv..a", ".inv", "inv.", "inv a"} {
		if err := b.DeleteChannels(t.Context(), "inv.a", bad); !errors.Is(err, calf.ErrInvalidChannel) {
			t.Errorf("DeleteChannels(%q): %v; want ErrInvalidChannel", bad, err)
		}
	}
	if diff := cmp.Diff(map[string]uint64{"inv.a": 1}, channelCounts(t, b)); diff != "" {
		t.Errorf("messages after the refused deletions (-want +got):\n%s", diff)
	}
	if err := b.DeleteChannels(t.Context()); err != nil {
		t.Errorf("DeleteChannels of no channel: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteChannels(t.Context(), "inv.a"); !errors.Is(err, calf.ErrClosed) {
		t.Errorf("DeleteChannels on a closed broker: %v; want ErrClosed", err)
	}
}

// TestDeleteChannelsWhileHeld checks the consumers of a channel deleted
// while a member holds its messages: the message in progress is
// handled and acknowledged, the one waiting behind it in its key's lane
// too, and the partition goes on with the next messages of the key, the
// consumer holding nothing outstanding afterwards.
func TestDeleteChannelsWhileHeld(t *testing.T) {
	backends(t, func(t *testing.T, open func() *Broker) {
		b := open()
		entered := make(chan string, 8)
		release := make(chan struct{})
		rec := newRecorder()
		subscribe(t, b, "held.>", func(ctx context.Context, m *calf.Message) error {
			if m.ID == "m1" {
				entered <- m.ID
				<-release
			}
			rec.add(m)
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("held.a", "k", "m1"), msg("held.a", "k", "m2"))
		select {
		case <-entered:
		case <-time.After(timeout):
			t.Fatal("m1 was not delivered")
		}
		if err := b.DeleteChannels(t.Context(), "held.a"); err != nil {
			t.Fatal(err)
		}
		if got := channelCounts(t, b); len(got) != 0 {
			t.Errorf("messages after the deletion: %v", got)
		}
		close(release)
		publish(t, b, msg("held.a", "k", "m3"), msg("held.b", "k", "m4"))
		got := rec.waitN(t, "the messages held and the later ones", 4)
		if diff := cmp.Diff([]handled{{"m1", 1}, {"m2", 1}, {"m3", 1}, {"m4", 1}}, got); diff != "" {
			t.Errorf("deliveries (-want +got):\n%s", diff)
		}
		waitStreamMsgs(t, b, 0)
		waitAckPending(t, b, ConsumerName("g", Partition("k", "", b.opts.Partitions)), 0)
	})
}

// TestDeleteChannelsUnacknowledged checks a message deleted while its
// member handled it, the member then closing without acknowledging it:
// it is not delivered again, and the member that takes the partition
// over handles the key's next messages, at the latest once its takeover
// gate stops waiting for the message.
func TestDeleteChannelsUnacknowledged(t *testing.T) {
	backendsWith(t, func(o *Options) { o.AckWait = 2 * time.Second }, func(t *testing.T, open func() *Broker) {
		b := open()
		entered := make(chan struct{}, 1)
		first := subscribe(t, b, "gone.>", func(ctx context.Context, m *calf.Message) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("gone.a", "k", "m1"))
		select {
		case <-entered:
		case <-time.After(timeout):
			t.Fatal("m1 was not delivered")
		}
		if err := b.DeleteChannels(t.Context(), "gone.a"); err != nil {
			t.Fatal(err)
		}
		// The member hands m1 back as it closes.
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		start := time.Now()
		subscribe(t, b, "gone.>", func(ctx context.Context, m *calf.Message) error {
			rec.add(m)
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("gone.a", "k", "m2"))
		rec.waitN(t, "the message published after the deletion", 1)
		// A server that still counts the purged message outstanding (2.9)
		// holds the new owner at its takeover gate until it gives up on
		// it; later ones forget the message at the purge.
		waited := time.Since(start)
		t.Logf("m2 handled %v after the new member subscribed", waited)
		if limit := gateTimeout(b.opts.AckWait) + time.Second; waited > limit {
			t.Errorf("m2 handled %v after the new member subscribed; want within %v", waited, limit)
		}
		// With the stream empty and nothing outstanding, no delivery of
		// m1 can come any more.
		waitStreamMsgs(t, b, 0)
		waitAckPending(t, b, ConsumerName("g", Partition("k", "", b.opts.Partitions)), 0)
		if diff := cmp.Diff([]handled{{"m2", 1}}, rec.get()); diff != "" {
			t.Errorf("deliveries (-want +got):\n%s", diff)
		}
	})
}

// waitAckPending waits until consumer of b's stream has n messages
// outstanding.
func waitAckPending(t *testing.T, b *Broker, consumer string, n int) {
	t.Helper()
	testwait.ForErr(t, timeout, fmt.Sprintf("consumer %s to have %d messages outstanding", consumer, n), func() error {
		c, err := b.js.Consumer(t.Context(), b.opts.Stream, consumer)
		if err != nil {
			return err
		}
		if got := c.CachedInfo().NumAckPending; got != n {
			return fmt.Errorf("it has %d", got)
		}
		return nil
	})
}
