package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/internal/testwait"
)

const timeout = brokertest.Timeout

// newCluster starts an in-process fake Kafka cluster, shut down when the
// test ends. It accepts session timeouts from 100 ms on, so that tests of
// crashes need not wait for the default.
func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testOptions returns options with a short backoff, a topic prefix unique
// to the test and few partitions.
func testOptions() *Options {
	return &Options{
		TopicPrefix: "t" + calf.NewID()[:10] + ".",
		Partitions:  4,
		Backoff:     func(int) time.Duration { return time.Millisecond },
	}
}

// open opens a broker on cluster c, closed when the test ends.
func open(t testing.TB, c *kfake.Cluster, opts *Options) *Broker {
	t.Helper()
	b, err := Open(t.Context(), c.ListenAddrs(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// features returns what the brokers on cluster c declare.
func features(c *kfake.Cluster) brokertest.Features {
	return brokertest.Features{
		// MaxPending bounds the lag of a topic's groups.
		QueueSize: queueSize,
		// A topic per channel.
		KeyOrderPerChannel: true,
		// One committed offset per partition: the records handled after
		// an interrupted one come again.
		ReplaysPastInterrupted: true,
		// A backing is a topic prefix of its own on the cluster.
		Durable: func(t *testing.T) func() calf.Broker {
			opts := testOptions()
			return func() calf.Broker { return open(t, c, opts) }
		},
		Crash: func(b calf.Broker) { b.(*Broker).crash() },
	}
}

// queueSize is the MaxPending of the conformance suite's brokers: above
// what a slow key holds back in its partition in the suite's tests, since
// the records handled after it count as pending until it is settled.
const queueSize = 256

func TestConformance(t *testing.T) {
	c := newCluster(t)
	brokertest.Run(t, func(t *testing.T) calf.Broker {
		opts := testOptions()
		opts.MaxPending = queueSize
		return open(t, c, opts)
	}, features(c))
}

type handled struct {
	ID      string
	Attempt int
}

// recorder records the deliveries a handler receives.
type recorder struct {
	mu     sync.Mutex
	calls  []handled
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(m *calf.Message) {
	r.mu.Lock()
	r.calls = append(r.calls, handled{m.ID, m.Metadata.Attempt})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) handle(_ context.Context, m *calf.Message) error {
	r.add(m)
	return nil
}

func (r *recorder) get() []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// waitFor waits until done holds for the calls recorded.
func (r *recorder) waitFor(t *testing.T, what string, done func([]handled) bool) []handled {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		calls := r.get()
		if done(calls) {
			return calls
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			t.Fatalf("%s: not done after %v; got %v", what, timeout, calls)
		}
	}
}

func (r *recorder) waitID(t *testing.T, what, id string) []handled {
	t.Helper()
	return r.waitFor(t, what, func(c []handled) bool {
		return slices.ContainsFunc(c, func(d handled) bool { return d.ID == id })
	})
}

func msg(channel, key, id string) *calf.Message {
	return &calf.Message{ID: id, Channel: channel, Key: key, Data: json.RawMessage(strconv.Quote(id)), Metadata: calf.Metadata{Time: time.Now()}}
}

func subscribe(t *testing.T, b calf.Broker, pattern string, h calf.Handler, opts *calf.SubscribeOptions) calf.Subscription {
	t.Helper()
	sub, err := b.Subscribe(t.Context(), pattern, h, opts)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", pattern, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func publish(t *testing.T, b calf.Broker, msgs ...*calf.Message) {
	t.Helper()
	for _, m := range msgs {
		if err := b.Publish(t.Context(), m); err != nil {
			t.Fatalf("Publish(%s): %v", m.ID, err)
		}
	}
}

func TestTopic(t *testing.T) {
	long := strings.Repeat("a", MaxTopicLength-len("p.")+1)
	tests := []struct {
		prefix, channel, want string
		invalid               bool
	}{
		{"", "calf.agent.calculator.input", "calf.agent.calculator.input", false},
		{"p.", "calf.agent.a-b_c.tool_call.add", "p.calf.agent.a-b_c.tool_call.add", false},
		{"", "orders.eu:west.placed", "orders.eu_west.placed", false},
		{"", "caf\u00e9.x", "caf__.x", false},
		{"p.", long[:len(long)-1], "p." + long[:len(long)-1], false},
		{"p.", long, "", true},
		{"", "a..b", "", true},
		{"", "a.*", "", true},
		{"", "", "", true},
	}
	for _, tc := range tests {
		got, err := Topic(tc.prefix, tc.channel)
		if tc.invalid {
			if !errors.Is(err, calf.ErrInvalidChannel) {
				t.Errorf("Topic(%q, %q) = %q, %v; want an error matching calf.ErrInvalidChannel", tc.prefix, tc.channel, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Topic(%q, %q) = %q, %v; want %q", tc.prefix, tc.channel, got, err, tc.want)
		}
	}
}

func TestMatcher(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"a.b", []string{"p.a.b"}, []string{"p.a.b.c", "p.a", "a.b", "p.a_b"}},
		{"a.*", []string{"p.a.b", "p.a.xyz"}, []string{"p.a", "p.a.b.c", "p.b.c", "pxa.b"}},
		{"a.>", []string{"p.a.b", "p.a.b.c.d"}, []string{"p.a", "p.ab.c"}},
		{"*.b", []string{"p.a.b", "p.x.b"}, []string{"p.b", "p.a.c.b", "p.a.bc"}},
		{"a:x.*", []string{"p.a_x.b"}, []string{"p.a.x.b", "p.aax.b"}},
		{"a+b.>", []string{"p.a_b.c"}, []string{"p.ab.c", "p.aab.c"}},
	}
	for _, tc := range tests {
		m, err := matcher("p.", tc.pattern)
		if err != nil {
			t.Fatalf("matcher(%q): %v", tc.pattern, err)
		}
		for _, topic := range tc.match {
			if !m.match(topic) {
				t.Errorf("pattern %q does not consume topic %q", tc.pattern, topic)
			}
		}
		for _, topic := range tc.miss {
			if m.match(topic) {
				t.Errorf("pattern %q consumes topic %q", tc.pattern, topic)
			}
		}
	}
	for _, p := range []string{"", "a.>.b", "a..b", "a.*x"} {
		if _, err := matcher("p.", p); !errors.Is(err, calf.ErrInvalidChannel) {
			t.Errorf("matcher(%q) = %v, want an error matching calf.ErrInvalidChannel", p, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(t.Context(), nil, nil); err == nil {
		t.Error("Open without seed brokers succeeded")
	}
	c := newCluster(t)
	if _, err := Open(t.Context(), c.ListenAddrs(), &Options{TopicPrefix: "a b"}); err == nil {
		t.Error("Open with a topic prefix holding a space succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if b, err := Open(ctx, []string{addr}, nil); err == nil {
		_ = b.Close()
		t.Error("Open of an unreachable cluster succeeded")
	}
}

// TestRetryHoldsOnlyItsPartition checks that a message being retried holds
// back the later messages of its partition, and not those of other
// partitions.
func TestRetryHoldsOnlyItsPartition(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
	release := make(chan struct{})
	rec := newRecorder()
	subscribe(t, b, "hold.*", func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		if m.ID == "stuck" {
			select {
			case <-release:
				return nil
			default:
				return errors.New("not yet")
			}
		}
		return nil
	}, &calf.SubscribeOptions{Group: "g", MaxAttempts: 1000})
	publish(t, b, msg("hold.x", "k", "stuck"), msg("hold.x", "k", "after"))
	rec.waitFor(t, "retries", func(c []handled) bool { return len(c) >= 3 })
	publish(t, b, msg("hold.y", "k", "other"))
	got := rec.waitID(t, "message of another partition", "other")
	if slices.ContainsFunc(got, func(d handled) bool { return d.ID == "after" }) {
		t.Errorf("the message after the one retried was handled first: %v", got)
	}
	close(release)
	got = rec.waitID(t, "message after the one retried", "after")
	last := slices.IndexFunc(got, func(d handled) bool { return d.ID == "after" })
	for _, d := range got[last:] {
		if d.ID == "stuck" {
			t.Errorf("the message retried was delivered after the next one: %v", got)
		}
	}
}

// TestUndecodableIsParked checks that records that are not message
// envelopes for their topic are parked with their bytes, and that their
// partition goes on.
func TestUndecodableIsParked(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	b := open(t, c, opts)
	dead := newRecorder()
	var mu sync.Mutex
	letters := map[string]*calf.DeadLetter{}
	subscribe(t, b, calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := m.Decode(&dl); err != nil {
			t.Error(err)
		}
		mu.Lock()
		letters[string(dl.RawData)+string(dl.Message.Data)] = &dl
		mu.Unlock()
		dead.add(m)
		return nil
	}, nil)
	rec := newRecorder()
	subscribe(t, b, "bad.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
	topic, _ := Topic(opts.TopicPrefix, "bad.x")
	raws := []string{"not json", `{"channel":"other.channel"}`}
	for _, raw := range raws {
		if err := b.cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(raw)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, b, msg("bad.x", "k", "good"))
	dead.waitFor(t, "dead letters", func(c []handled) bool { return len(c) >= len(raws) })
	mu.Lock()
	for _, raw := range raws {
		dl := letters[raw]
		if dl == nil {
			t.Errorf("no dead letter for %q; got %v", raw, letters)
			continue
		}
		if !dl.Permanent || dl.Group != "g" || !strings.Contains(dl.Error, "malformed") || dl.Message.Channel != topic {
			t.Errorf("dead letter %+v, want permanent, group g, a wire error, channel %q", dl, topic)
		}
	}
	mu.Unlock()
	got := rec.waitID(t, "the good message", "good")
	if diff := cmp.Diff([]handled{{"good", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestForeignRecord checks that a record from another producer, whose
// envelope leaves out the channel and the key, is delivered with the
// topic's channel and the record key.
func TestForeignRecord(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	b := open(t, c, opts)
	got := make(chan *calf.Message, 1)
	subscribe(t, b, "foreign.x", func(ctx context.Context, m *calf.Message) error {
		got <- m
		return nil
	}, nil)
	topic, _ := Topic(opts.TopicPrefix, "foreign.x")
	value := `{"id":"f1","data":{"n":1},"metadata":{"run_id":"r1"}}`
	if err := b.cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte("r1"), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		want := &calf.Message{ID: "f1", Channel: "foreign.x", Key: "r1", Data: json.RawMessage(`{"n":1}`), Metadata: calf.Metadata{RunID: "r1", Attempt: 1}}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("message (-want +got):\n%s", diff)
		}
	case <-time.After(timeout):
		t.Fatal("no message")
	}
}

// TestPatternFindsTopicsOfOtherProcesses checks that a subscription to a
// pattern consumes a topic another process creates after it subscribed,
// from its first message.
func TestPatternFindsTopicsOfOtherProcesses(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	opts.MetadataMaxAge = 200 * time.Millisecond
	sub, pub := open(t, c, opts), open(t, c, opts)
	rec := newRecorder()
	subscribe(t, sub, "new.*", rec.handle, &calf.SubscribeOptions{Group: "g"})
	publish(t, pub, msg("new.a", "k", "a1"), msg("new.a", "k", "a2"), msg("new.b", "k", "b1"))
	rec.waitFor(t, "messages on topics created by another broker", func(c []handled) bool { return len(c) >= 3 })
}

// TestDeadMemberPartitionsMove checks that the partitions of a member that
// dies without leaving its group (its leave request never arrives) move to
// another member once its session times out, and that the message it was
// handling is handled again.
func TestDeadMemberPartitionsMove(t *testing.T) {
	c := newCluster(t)
	// Swallow leave requests, as a killed process never sends them.
	c.ControlKey(int16(kmsg.LeaveGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	opts := testOptions()
	opts.SessionTimeout = 500 * time.Millisecond
	opts.HeartbeatInterval = 50 * time.Millisecond
	a, b := open(t, c, opts), open(t, c, opts)
	started := make(chan struct{})
	var once sync.Once
	subscribe(t, a, "dead.x", func(ctx context.Context, m *calf.Message) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}, &calf.SubscribeOptions{Group: "g"})
	publish(t, a, msg("dead.x", "k", "m1"), msg("dead.x", "k", "m2"))
	<-started
	a.crash()
	rec := newRecorder()
	subscribe(t, b, "dead.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
	got := rec.waitFor(t, "messages of the dead member", func(c []handled) bool { return len(c) >= 2 })
	if diff := cmp.Diff([]handled{{"m1", 1}, {"m2", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestPrivateSubscriptionJoinsNoGroup checks that a subscription without a
// group consumes without a Kafka consumer group, and gets the messages
// published after Subscribe returns, on existing topics and on topics
// created later.
func TestPrivateSubscriptionJoinsNoGroup(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
	publish(t, b, msg("priv.a", "k", "before"))
	rec := newRecorder()
	subscribe(t, b, "priv.*", rec.handle, nil)
	publish(t, b, msg("priv.a", "k", "a1"), msg("priv.b", "k", "b1"))
	got := rec.waitFor(t, "messages", func(c []handled) bool { return len(c) >= 2 })
	slices.SortFunc(got, func(x, y handled) int { return strings.Compare(x.ID, y.ID) })
	if diff := cmp.Diff([]handled{{"a1", 1}, {"b1", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	groups, err := b.adm.ListGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups()) > 0 {
		t.Errorf("groups %v exist; want none", groups.Groups())
	}
}

// TestTooLarge checks that a message over the cluster's limit fails with
// calf.ErrMessageTooLarge.
func TestTooLarge(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
	m := msg("big.x", "k", "big")
	m.Data = json.RawMessage(strconv.Quote(strings.Repeat("x", 2<<20)))
	if err := b.Publish(t.Context(), m); !errors.Is(err, calf.ErrMessageTooLarge) {
		t.Errorf("Publish of 2 MiB = %v, want an error matching calf.ErrMessageTooLarge", err)
	}
}

// TestFullQueuePausesFetching checks that a partition whose queue fills
// is paused and resumed without losing or reordering its messages.
func TestFullQueuePausesFetching(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	opts.QueueSize = 3
	b := open(t, c, opts)
	rec := newRecorder()
	gate := make(chan struct{})
	subscribe(t, b, "pause.x", func(ctx context.Context, m *calf.Message) error {
		<-gate // until every message is published, so that they queue up
		return rec.handle(ctx, m)
	}, &calf.SubscribeOptions{Group: "g"})
	var want []handled
	for i := range 60 {
		id := "m" + strconv.Itoa(i)
		want = append(want, handled{id, 1})
		publish(t, b, msg("pause.x", "k", id))
	}
	sub := b.subscriptions()[0]
	waitPaused(t, sub, true)
	close(gate)
	got := rec.waitFor(t, "every message", func(c []handled) bool { return len(c) >= len(want) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	waitPaused(t, sub, false)
}

// subscriptions returns the broker's subscriptions.
func (b *Broker) subscriptions() []*subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	var subs []*subscription
	for s := range b.subs {
		subs = append(subs, s)
	}
	return subs
}

// waitPaused waits until the client of s has some partition paused, or
// none.
func waitPaused(t *testing.T, s *subscription, paused bool) {
	t.Helper()
	testwait.For(t, timeout, fmt.Sprintf("partitions paused %v", paused), func() bool {
		return (len(s.cl.PauseFetchPartitions(nil)) > 0) == paused
	})
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url   string
		seeds []string
		opts  *Options
		fails bool
	}{
		{"kafka://127.0.0.1:9092", []string{"127.0.0.1:9092"}, &Options{}, false},
		{"kafka://a,b:9093/", []string{"a:9092", "b:9093"}, &Options{}, false},
		{
			"kafka://k:1?partitions=32&topic_prefix=prod.&replication_factor=3&session_timeout=10s&max_pending=100",
			[]string{"k:1"},
			&Options{Partitions: 32, TopicPrefix: "prod.", ReplicationFactor: 3, SessionTimeout: 10 * time.Second, MaxPending: 100},
			false,
		},
		{"nats://k:1", nil, nil, true},
		{"kafka://", nil, nil, true},
		{"kafka://k:1?partitions=0", nil, nil, true},
		{"kafka://k:1?partition=3", nil, nil, true},
		{"kafka://k:1?session_timeout=6", nil, nil, true},
		{"kafka://k:1?failover_after=500ms", []string{"k:1"}, &Options{FailoverAfter: 500 * time.Millisecond}, false},
		{"kafka://k:1?failover_after=off", []string{"k:1"}, &Options{FailoverAfter: -1}, false},
		{"kafka://k:1?failover_after=0s", nil, nil, true},
		{"kafka://k:1/x", nil, nil, true},
	}
	for _, tc := range tests {
		seeds, opts, err := ParseURL(tc.url)
		if tc.fails {
			if err == nil {
				t.Errorf("ParseURL(%q) succeeded", tc.url)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if diff := cmp.Diff(tc.seeds, seeds); diff != "" {
			t.Errorf("ParseURL(%q) seeds (-want +got):\n%s", tc.url, diff)
		}
		if diff := cmp.Diff(tc.opts, opts, cmpopts.IgnoreFields(Options{}, "Backoff", "Logger", "Now", "ClientOptions")); diff != "" {
			t.Errorf("ParseURL(%q) options (-want +got):\n%s", tc.url, diff)
		}
	}
}

// TestDefaultSessionTimeout checks that the session timeout defaults to
// the lowest the cluster accepts, within bounds.
func TestDefaultSessionTimeout(t *testing.T) {
	tests := []struct {
		clusterMin string // group.min.session.timeout.ms; empty for Kafka's default
		set        time.Duration
		want       time.Duration
		heartbeat  time.Duration
	}{
		{"", 0, 6 * time.Second, DefaultHeartbeatInterval},
		{"3000", 0, 3 * time.Second, DefaultHeartbeatInterval},
		{"500", 0, MinDefaultSessionTimeout, DefaultHeartbeatInterval},
		{"500", 900 * time.Millisecond, 900 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tc := range tests {
		var copts []kfake.Opt
		if tc.clusterMin != "" {
			copts = append(copts, kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": tc.clusterMin}))
		}
		c, err := kfake.NewCluster(copts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		opts := testOptions()
		opts.SessionTimeout = tc.set
		b := open(t, c, opts)
		if b.opts.SessionTimeout != tc.want || b.opts.HeartbeatInterval != tc.heartbeat {
			t.Errorf("cluster minimum %q, SessionTimeout %v: session timeout %v, heartbeat %v; want %v, %v",
				tc.clusterMin, tc.set, b.opts.SessionTimeout, b.opts.HeartbeatInterval, tc.want, tc.heartbeat)
		}
	}
}

// BenchmarkPublishHandle measures a message's way through the in-process
// fake cluster, from Publish to the end of its handler, with 16 keys.
func BenchmarkPublishHandle(b *testing.B) {
	brokertest.PublishHandleBenchmark(b, open(b, newCluster(b), &Options{TopicPrefix: "bench.", Partitions: 16}))
}

// TestDuplicateIDsDropped checks that a message published again with the
// id of one handled is delivered once, unless the window is turned off.
func TestDuplicateIDsDropped(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		window time.Duration
		want   []handled
	}{
		{0, []handled{{"m1", 1}, {"m2", 1}}},
		{-1, []handled{{"m1", 1}, {"m1", 1}, {"m2", 1}}},
	} {
		opts := testOptions()
		opts.DuplicateWindow = tc.window
		b := open(t, c, opts)
		rec := newRecorder()
		subscribe(t, b, "dup.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("dup.x", "k", "m1"), msg("dup.x", "k", "m1"), msg("dup.x", "k", "m2"))
		got := rec.waitID(t, "m2", "m2")
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("window %v: deliveries (-want +got):\n%s", tc.window, diff)
		}
	}
}

func TestWindow(t *testing.T) {
	now := time.Unix(0, 0)
	w := newWindow(time.Minute, func() time.Time { return now })
	w.add("a")
	now = now.Add(30 * time.Second)
	w.add("b")
	if !w.has("a") || !w.has("b") || w.has("c") || w.has("") {
		t.Fatalf("after adding a and b: has a %v, b %v, c %v", w.has("a"), w.has("b"), w.has("c"))
	}
	now = now.Add(31 * time.Second)
	if w.has("a") || !w.has("b") {
		t.Errorf("a minute after a: has a %v, b %v; want false, true", w.has("a"), w.has("b"))
	}
	for i := range maxRemembered {
		w.add(strconv.Itoa(i))
	}
	if w.has("b") || !w.has("0") || len(w.ring) != maxRemembered || len(w.ids) != maxRemembered {
		t.Errorf("after %d more: has b %v, has 0 %v, %d entries, %d ids", maxRemembered, w.has("b"), w.has("0"), len(w.ring), len(w.ids))
	}
	off := newWindow(-1, time.Now)
	off.add("a")
	if off.has("a") {
		t.Error("a window turned off remembers")
	}
}

// TestTopicsCreatedBeforehand checks that a broker that may not create
// topics publishes to those that exist, and reports the others.
func TestTopicsCreatedBeforehand(t *testing.T) {
	c, err := kfake.NewCluster(kfake.SeedTopics(2, "pre.made"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		creq := req.(*kmsg.CreateTopicsRequest)
		resp := creq.ResponseKind().(*kmsg.CreateTopicsResponse)
		resp.SetVersion(creq.GetVersion())
		for _, rt := range creq.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	b := open(t, c, &Options{TopicPrefix: "pre."})
	rec := newRecorder()
	subscribe(t, b, "made", rec.handle, &calf.SubscribeOptions{Group: "g"})
	publish(t, b, msg("made", "k", "m1"))
	rec.waitID(t, "message on a topic made beforehand", "m1")
	if err := b.Publish(t.Context(), msg("missing", "k", "m2")); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("Publish to a topic that may not be created = %v, want an error matching TopicAuthorizationFailed", err)
	}
}

// TestRevokeWaitsForHandler checks that a partition taken from a member
// in a rebalance moves only once the member's handler in progress has
// returned and its offset is committed: the message is not handled by the
// new owner too.
func TestRevokeWaitsForHandler(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	opts.Partitions, opts.Concurrency = 1, 2
	a, b := open(t, c, opts), open(t, c, opts)
	release := make(chan struct{})
	var releaseOnce sync.Once
	rec := newRecorder()
	started := make(chan string, 2)
	group := &calf.SubscribeOptions{Group: "g"}
	subA := subscribe(t, a, "rv.*", func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		if strings.HasSuffix(m.ID, "-1") {
			started <- m.ID
			<-release
		}
		return nil
	}, group).(*subscription)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the subscription closes
	publish(t, a, msg("rv.a", "k", "a-1"), msg("rv.b", "k", "b-1"))
	for range 2 {
		select {
		case <-started:
		case <-time.After(timeout):
			t.Fatal("the first member did not start both messages")
		}
	}
	subB := subscribe(t, b, "rv.*", rec.handle, group).(*subscription)
	// Wait until the group takes one of the two partitions from a: its
	// worker is gone while its handler still runs.
	testwait.For(t, timeout, "a partition revoked from the first member", func() bool {
		subA.mu.Lock()
		defer subA.mu.Unlock()
		return len(subA.workers) < 2
	})
	// The partition must not reach b while a's handler runs. It would
	// once a rejoined, its revoke done: b would learn of the rebalance at
	// its next heartbeat and join a later generation. So b's heartbeats
	// are counted: two more in the generation it joined show that a has
	// not rejoined meanwhile.
	var gen int32
	testwait.For(t, timeout, "the second member to join the group", func() bool {
		_, gen = subB.cl.GroupMetadata()
		return gen > 0
	})
	memberB, _ := subB.cl.GroupMetadata()
	var beats atomic.Int32
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if hb := req.(*kmsg.HeartbeatRequest); hb.MemberID == memberB && hb.Generation == gen {
			beats.Add(1)
		}
		return nil, nil, false
	})
	testwait.For(t, timeout, "the second member to heartbeat twice", func() bool { return beats.Load() >= 2 })
	subB.mu.Lock()
	n := len(subB.workers)
	subB.mu.Unlock()
	if _, genB := subB.cl.GroupMetadata(); n > 0 || genB != gen {
		t.Fatalf("a partition moved while the handler of its message still ran: the second member has %d partitions, generation %d after %d", n, genB, gen)
	}
	if got := rec.get(); len(got) != 2 {
		t.Fatalf("deliveries before the handlers returned: %v; want the two first", got)
	}
	releaseOnce.Do(func() { close(release) })
	publish(t, a, msg("rv.a", "k", "a-2"), msg("rv.b", "k", "b-2"))
	got := rec.waitFor(t, "the second messages", func(c []handled) bool {
		return slices.ContainsFunc(c, func(d handled) bool { return d.ID == "a-2" }) &&
			slices.ContainsFunc(c, func(d handled) bool { return d.ID == "b-2" })
	})
	count := map[string]int{}
	for _, d := range got {
		count[d.ID]++
	}
	if diff := cmp.Diff(map[string]int{"a-1": 1, "b-1": 1, "a-2": 1, "b-2": 1}, count); diff != "" {
		t.Errorf("deliveries per message (-want +got):\n%s", diff)
	}
}

func TestKgoLogger(t *testing.T) {
	var buf strings.Builder
	l := kgoLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if got := l.Level(); got != kgo.LogLevelWarn {
		t.Errorf("Level() = %v, want warn", got)
	}
	l.Log(kgo.LogLevelWarn, "group session lost", "group", "g")
	if out := buf.String(); !strings.Contains(out, `msg="kafka: group session lost" group=g`) || !strings.Contains(out, "level=WARN") {
		t.Errorf("logged %q", out)
	}
	if got := (kgoLogger{slog.New(slog.DiscardHandler)}).Level(); got != kgo.LogLevelNone {
		t.Errorf("Level() of a discarding logger = %v, want none", got)
	}
}

// TestDeletedTopicCreatedAgain checks that a topic deleted behind the
// broker's back is created again.
func TestDeletedTopicCreatedAgain(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	// Fail fast on the deleted topic.
	opts.ClientOptions = []kgo.Opt{kgo.UnknownTopicRetries(1), kgo.MetadataMinAge(10 * time.Millisecond)}
	b := open(t, c, opts)
	publish(t, b, msg("del.x", "k", "m1"))
	topic, _ := Topic(opts.TopicPrefix, "del.x")
	if _, err := b.adm.DeleteTopic(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 2 {
		// The first Publish may fail: it finds the topic gone.
		if err = b.Publish(t.Context(), msg("del.x", "k", "m2")); err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("Publish after the topic was deleted: %v", err)
	}
}

// TestInboxTopicHasOnePartition checks that the topic of a client's inbox
// gets a single partition, and other topics Options.Partitions.
func TestInboxTopicHasOnePartition(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	b := open(t, c, opts)
	inbox := calf.InboxPrefix + calf.NewID()
	publish(t, b, msg(inbox, "k", "m1"), msg("other.x", "k", "m2"))
	for ch, want := range map[string]int{inbox: 1, "other.x": opts.Partitions} {
		topic, _ := Topic(opts.TopicPrefix, ch)
		details, err := b.adm.ListTopics(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("topic %s has %d partitions, want %d", topic, got, want)
		}
	}
}

// CreateChannels creates the topics of channels ahead of any publish, and
// refuses invalid channels and a closed broker.
func TestCreateChannels(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	b := open(t, c, opts)
	if err := calf.CreateChannels(t.Context(), b, "cc.one", "cc.two"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"cc.one", "cc.two"} {
		topic, _ := Topic(opts.TopicPrefix, ch)
		topics, err := b.adm.ListTopics(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if !topics.Has(topic) || topics[topic].Err != nil {
			t.Errorf("topic %s of channel %s not created: %v", topic, ch, topics)
		}
	}
	never, _ := Topic(opts.TopicPrefix, "cc.never")
	if topics, err := b.adm.ListTopics(t.Context(), never); err != nil || (topics.Has(never) && topics[never].Err == nil) {
		t.Errorf("a topic never created is listed: %v, %v", topics, err)
	}
	if err := b.CreateChannels(t.Context(), "cc.*"); !errors.Is(err, calf.ErrInvalidChannel) {
		t.Errorf("CreateChannels(pattern) = %v, want ErrInvalidChannel", err)
	}
	_ = b.Close()
	if err := b.CreateChannels(t.Context(), "cc.three"); !errors.Is(err, calf.ErrClosed) {
		t.Errorf("CreateChannels after Close = %v, want ErrClosed", err)
	}
}

// TestSilentMemberIsRemovedFromItsGroup checks that the partitions of a
// member whose process dies without leaving its group move to another
// member once its liveness beats stop for FailoverAfter, long before its
// session times out.
func TestSilentMemberIsRemovedFromItsGroup(t *testing.T) {
	c := newCluster(t)
	// Swallow the leave requests of members leaving by themselves, as a
	// killed process never sends them; let through those that remove a
	// silent member.
	c.ControlKey(int16(kmsg.LeaveGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, m := range req.(*kmsg.LeaveGroupRequest).Members {
			if m.Reason != nil && strings.HasPrefix(*m.Reason, "calf:") {
				return nil, nil, false
			}
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	opts := testOptions()
	// Without failover, the partitions would move after a minute.
	opts.SessionTimeout = time.Minute
	opts.FailoverAfter = 500 * time.Millisecond
	a, b := open(t, c, opts), open(t, c, opts)
	started := make(chan struct{})
	var once sync.Once
	subscribe(t, a, "silent.x", func(ctx context.Context, m *calf.Message) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}, &calf.SubscribeOptions{Group: "g"})
	publish(t, a, msg("silent.x", "k", "m1"))
	<-started
	rec := newRecorder()
	subscribe(t, b, "silent.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
	// b has joined the group, a still holds the partition of "k", and b
	// has seen a's beats.
	brokertest.WaitUntil(t, "both members beating", func() bool {
		b.live.mu.Lock()
		defer b.live.mu.Unlock()
		return len(b.live.peers) == 1
	})
	a.crash()
	publish(t, b, msg("silent.x", "k", "m2"))
	got := rec.waitFor(t, "messages of the silent member", func(c []handled) bool { return len(c) >= 2 })
	if diff := cmp.Diff([]handled{{"m1", 1}, {"m2", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	topic := opts.TopicPrefix + MembersTopic
	details, err := b.adm.ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[topic].Partitions); n != 1 {
		t.Errorf("%s has %d partitions, want 1", topic, n)
	}
	if retention := topicRetention(t, b, topic); retention != membersRetention {
		t.Errorf("%s has retention.ms %q, want %s", topic, retention, membersRetention)
	}
}

// TestFailoverOff checks that a negative FailoverAfter publishes no
// liveness beats.
func TestFailoverOff(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	opts.FailoverAfter = -1
	b := open(t, c, opts)
	rec := newRecorder()
	subscribe(t, b, "off.x", rec.handle, &calf.SubscribeOptions{Group: "g"})
	publish(t, b, msg("off.x", "k", "m1"))
	rec.waitID(t, "message", "m1")
	topics, err := b.adm.ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(opts.TopicPrefix + MembersTopic) {
		t.Errorf("topic %s exists with failover off", opts.TopicPrefix+MembersTopic)
	}
}

// TestStaleViewEvictsNobody checks that a broker that has not read back
// its own beats lately (it was paused, or the cluster is slow) takes no
// peer for dead, and that it does once its view is fresh.
func TestStaleViewEvictsNobody(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
	l := b.live
	long := time.Now().Add(-time.Minute)
	l.mu.Lock()
	l.peers["p"] = &peer{seen: long}
	l.selfSeen = long
	l.mu.Unlock()
	l.evictSilent()
	l.mu.Lock()
	_, kept := l.peers["p"]
	l.selfSeen = time.Now()
	l.mu.Unlock()
	if !kept {
		t.Error("a broker with a stale view took a silent peer for dead")
	}
	l.evictSilent()
	l.mu.Lock()
	_, kept = l.peers["p"]
	l.mu.Unlock()
	if kept {
		t.Error("a broker with a fresh view kept a peer silent for a minute")
	}
}

// topicRetention returns the retention.ms of topic.
func topicRetention(t *testing.T, b *Broker, topic string) string {
	t.Helper()
	configs, err := b.adm.DescribeTopicConfigs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// TestClientDeletesItsInboxTopic: a client's inbox topic has a bounded
// retention, and the client deletes it when it shuts down; deleting a
// channel without a topic is not an error.
func TestClientDeletesItsInboxTopic(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	b := open(t, c, opts)
	client := calf.NewClient(b, nil)
	inbox := client.Inbox()
	f, err := client.Follow(t.Context(), inbox, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := client.Emit(t.Context(), inbox, 1, calf.WithMetadata(calf.Metadata{CorrelationID: "r1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	topic, _ := Topic(opts.TopicPrefix, inbox)
	if got := topicRetention(t, b, topic); got != inboxRetention {
		t.Errorf("inbox topic retention.ms %q, want %s", got, inboxRetention)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	details, err := b.adm.ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if details.Has(topic) {
		t.Errorf("inbox topic %s still exists after the client shut down", topic)
	}
	if err := b.DeleteChannels(t.Context(), "never.published"); err != nil {
		t.Errorf("deleting a channel without a topic: %v", err)
	}
	if err := b.DeleteChannels(t.Context(), "bad..channel"); !errors.Is(err, calf.ErrInvalidChannel) {
		t.Errorf("deleting an invalid channel: %v", err)
	}
}

// A subscription holds at most QueueSize records of a partition between
// fetching and settling: with every handler blocked, no more than that
// many are handed to handlers, however many keys are waiting.
func TestHeldRecordsAreBounded(t *testing.T) {
	c := newCluster(t)
	opts := testOptions()
	opts.Partitions, opts.QueueSize = 1, 8
	b := open(t, c, opts)
	ch := "bound.held"
	var mu sync.Mutex
	started := 0
	release := make(chan struct{})
	sub, err := b.Subscribe(t.Context(), ch, func(ctx context.Context, m *calf.Message) error {
		mu.Lock()
		started++
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &calf.SubscribeOptions{Group: "g", Concurrency: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const total = 40
	for i := range total {
		if err := b.Publish(t.Context(), &calf.Message{ID: "m" + strconv.Itoa(i), Channel: ch, Key: "k" + strconv.Itoa(i), Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return started
	}
	testwait.For(t, timeout, "QueueSize handlers started", func() bool { return count() >= opts.QueueSize })
	// A chance for more to start, were it allowed: the dispatcher has
	// taken the next record (offset QueueSize, the topic being new) from
	// the queue and waits for room.
	s := sub.(*subscription)
	testwait.For(t, timeout, "the dispatcher to hold the record after QueueSize", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range s.workers {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.queue) > 0 && w.queue[0].Offset > int64(opts.QueueSize)
		}
		return false
	})
	if n := count(); n != opts.QueueSize {
		t.Errorf("%d handlers started with all blocked, want QueueSize = %d", n, opts.QueueSize)
	}
	close(release)
	testwait.For(t, timeout, "every message handled after the release", func() bool { return count() >= total })
	if n := count(); n != total {
		t.Errorf("%d of %d messages handled after the release", n, total)
	}
}
