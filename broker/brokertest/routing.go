package brokertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf"
)

// testRoundTrip checks that a message arrives as published, with the
// attempt set, and that the handler's context carries it.
func testRoundTrip(e *env) {
	t := e.t
	now := time.Now()
	full := calf.Metadata{
		CorrelationID: "corr-1",
		CausationID:   "cause-1",
		RunID:         "run-1",
		SessionID:     "session-1",
		Traceparent:   "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		Time:          now,
		Producer:      "host-1/4242",
	}
	tests := []struct {
		name string
		msg  *calf.Message
	}{
		{"everything", &calf.Message{Key: "order-1", Data: json.RawMessage(`{"n":1,"s":"x","l":[true,null]}`), Metadata: full}},
		{"no key", &calf.Message{Data: json.RawMessage(`"h\u00e9llo"`), Metadata: calf.Metadata{Time: now, RunID: "run-2"}}},
		{"no data", &calf.Message{Key: "k", Metadata: calf.Metadata{Time: now}}},
		{"number", &calf.Message{Key: "k", Data: json.RawMessage(`42`), Metadata: calf.Metadata{Time: now, CorrelationID: "c"}}},
	}
	got := newCollector()
	e.subscribe(e.channel(">"), func(ctx context.Context, m *calf.Message) error {
		if in, ok := calf.MessageFromContext(ctx); !ok || in.ID != m.ID {
			t.Errorf("handler context carries %v (ok %v), want message %s", in, ok, m.ID)
		}
		return got.handle(ctx, m)
	}, nil)
	for i, tc := range tests {
		tc.msg.ID = e.id(strconv.Itoa(i))
		tc.msg.Channel = e.channel("round", strconv.Itoa(i))
		e.publish(tc.msg)
	}
	byID := map[string]*calf.Message{}
	for _, m := range got.waitN(t, "round trip", len(tests)) {
		byID[m.ID] = m
	}
	for _, tc := range tests {
		want := tc.msg.Clone()
		want.Metadata.Attempt = 1
		if diff := cmp.Diff(want, byID[want.ID], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: received message differs (-published +received):\n%s", tc.name, diff)
		}
	}
}

// testPatterns checks which channels a pattern matches. Every case
// publishes with one key and ends with a matching channel, so that once
// the last message arrives every earlier match has arrived too.
func testPatterns(e *env) {
	// Q stands for a token unique to the case.
	tests := []struct {
		pattern  string
		channels []string
		want     []string
	}{
		{"Q.a.b", []string{"Q.a", "Q.a.b.c", "Q.a.c", "Q.b.b", "Qa.b", "Q.a.b"}, []string{"Q.a.b"}},
		{"Q.*.b", []string{"Q.a.c", "Q.a.b.c", "Q.b", "Q.a.b", "Q.xyz.b"}, []string{"Q.a.b", "Q.xyz.b"}},
		{"Q.a.*", []string{"Q.a", "Q.a.b.c", "Q.b.c", "Q.a.b", "Q.a.c"}, []string{"Q.a.b", "Q.a.c"}},
		{"Q.a.>", []string{"Q.a", "Q.b.c", "Q.a.b", "Q.ab.c", "Q.a.b.c.d"}, []string{"Q.a.b", "Q.a.b.c.d"}},
		{"Q.>", []string{"Qx.a", "Q", "Q.a", "Q.a.b.c"}, []string{"Q.a", "Q.a.b.c"}},
		{"Q.*.>", []string{"Q.a", "Q.a.b", "Q.b", "Q.a.b.c"}, []string{"Q.a.b", "Q.a.b.c"}},
		{"*.Q", []string{"Q", "a.Q.b", "a.b.Q", "a.Q", "b.Q"}, []string{"a.Q", "b.Q"}},
		{"*.*.Q", []string{"a.Q", "a.b.Q", "a.b.c.Q", "c.d.Q"}, []string{"a.b.Q", "c.d.Q"}},
	}
	for i, tc := range tests {
		e.t.Run(tc.pattern, func(t *testing.T) {
			e := e.with(t)
			q := e.prefix + "c" + strconv.Itoa(i)
			expand := func(s string) string { return strings.ReplaceAll(s, "Q", q) }
			got := newCollector()
			e.subscribe(expand(tc.pattern), got.handle, nil)
			var want []string
			for j, ch := range tc.channels {
				e.publish(e.msg(expand(ch), "k", e.id(fmt.Sprintf("c%d-%d", i, j))))
			}
			for _, ch := range tc.want {
				want = append(want, expand(ch))
			}
			last := e.id(fmt.Sprintf("c%d-%d", i, len(tc.channels)-1))
			msgs := got.waitID(t, "last matching message", last)
			gotChannels := channels(msgs)
			if e.f.KeyOrderPerChannel {
				// The messages of other channels may come after the
				// last one: wait for as many as match, and compare
				// the sets.
				msgs = got.waitN(t, "every matching message", len(want))
				gotChannels = channels(msgs)
				slices.Sort(want)
				slices.Sort(gotChannels)
			}
			if diff := cmp.Diff(want, gotChannels); diff != "" {
				t.Errorf("pattern %s received (-want +got):\n%s", expand(tc.pattern), diff)
			}
		})
	}
}

func testInvalidPatterns(e *env) {
	for _, p := range []string{"", ".", "a..b", ".a", "a.", "a.>.b", ">.a", "a.>x", "a.*x", "a b", "a.\tb"} {
		sub, err := e.b.Subscribe(e.t.Context(), p, func(context.Context, *calf.Message) error { return nil }, nil)
		if !errors.Is(err, calf.ErrInvalidChannel) {
			e.t.Errorf("Subscribe(%q) = %v, want an error matching calf.ErrInvalidChannel", p, err)
		}
		if sub != nil {
			e.t.Errorf("Subscribe(%q) returned a subscription with its error", p)
			_ = sub.Close()
		}
	}
}

func testInvalidChannels(e *env) {
	for _, ch := range []string{"", "a..b", "a.*", "a.>", "*", ">", "a.b c", ".a", "a."} {
		m := e.msg(ch, "k", e.id("bad"))
		if err := e.b.Publish(e.t.Context(), m); !errors.Is(err, calf.ErrInvalidChannel) {
			e.t.Errorf("Publish on %q = %v, want an error matching calf.ErrInvalidChannel", ch, err)
		}
	}
}

// testNoSubscriber checks that publishing to a channel nobody listens to
// succeeds, and that a new subscription does not receive what was
// published before it.
func testNoSubscriber(e *env) {
	ch := e.channel("nobody")
	e.publish(e.msg(ch, "k", e.id("before")))
	got := newCollector()
	e.subscribe(ch, got.handle, nil)
	e.publish(e.msg(ch, "k", e.id("after")))
	msgs := got.waitID(e.t, "message after subscribing", e.id("after"))
	if diff := cmp.Diff([]string{e.id("after")}, ids(msgs)); diff != "" {
		e.t.Errorf("received (-want +got):\n%s", diff)
	}
}

// testGroups checks that the members of a group share its messages, each
// handled once, that every group and every private subscription gets a
// copy of each message.
func testGroups(e *env) {
	t := e.t
	ch := e.channel("groups")
	one, two := newAudience("group one"), newAudience("group two")
	private1, private2 := newAudience("private 1"), newAudience("private 2")
	for range 3 {
		e.subscribe(ch, one.handle, &calf.SubscribeOptions{Group: e.group("one")})
	}
	for range 2 {
		e.subscribe(ch, two.handle, &calf.SubscribeOptions{Group: e.group("two")})
	}
	e.subscribe(ch, private1.handle, nil)
	e.subscribe(ch, private2.handle, &calf.SubscribeOptions{})

	const keys, perKey = 6, 10
	var want []string
	for i := range perKey {
		for k := range keys {
			id := e.id(fmt.Sprintf("k%d-%d", k, i))
			want = append(want, id)
			e.publish(e.msg(ch, "k"+strconv.Itoa(k), id))
		}
	}
	// A last message on every key: once it arrives, any redelivery of an
	// earlier message of the key would break the key's order.
	for k := range keys {
		id := e.id(fmt.Sprintf("k%d-last", k))
		want = append(want, id)
		e.publish(e.msg(ch, "k"+strconv.Itoa(k), id))
	}
	slices.Sort(want)
	for _, a := range []*audience{one, two, private1, private2} {
		a.got.waitFor(t, a.name, func([]*calf.Message) bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.seen) == len(want)
		})
		a.mu.Lock()
		got := map[string]int{}
		for _, id := range want {
			got[id] = 1
		}
		if diff := cmp.Diff(got, a.seen); diff != "" {
			t.Errorf("%s: deliveries per message (-want +got):\n%s", a.name, diff)
		}
		a.mu.Unlock()
	}
}

// testMemberLeaves checks that the members that remain in a group receive
// its messages once another member has left.
func testMemberLeaves(e *env) {
	t := e.t
	ch := e.channel("leave")
	opts := &calf.SubscribeOptions{Group: e.group("leave")}
	leaving, staying := newCollector(), newCollector()
	sub := e.subscribe(ch, leaving.handle, opts)
	e.subscribe(ch, staying.handle, opts)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var want []string
	for i := range 20 {
		id := e.id(strconv.Itoa(i))
		want = append(want, id)
		e.publish(e.msg(ch, "k"+strconv.Itoa(i%4), id))
	}
	msgs := staying.waitN(t, "remaining member", len(want))
	got := ids(msgs)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("remaining member received (-want +got):\n%s", diff)
	}
	if n := len(leaving.snapshot()); n != 0 {
		t.Errorf("closed member received %d messages", n)
	}
}
