package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/internal/testwait"
)

const timeout = brokertest.Timeout

// testOptions returns options with a short backoff and ack wait, and a
// stream and prefix unique to the test.
func testOptions() *Options {
	id := calf.NewID()[:12]
	return &Options{
		Stream:  "CALFTEST_" + id,
		Prefix:  "calftest" + id,
		Backoff: func(int) time.Duration { return time.Millisecond },
		AckWait: 3 * time.Second,
	}
}

// natsURL returns the URL of the NATS server the tests use, skipping the
// test when it is unreachable, unless CALF_TEST_SERVICES is set.
func natsURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("CALF_TEST_NATS_URL")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	host := u
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		host = pu.Host
	}
	conn, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("NATS at %s is unreachable: %v", u, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", u, err)
	}
	_ = conn.Close()
	return u
}

// openExternal opens a broker on the external server with opts, deleting
// its stream when the test ends.
func openExternal(t testing.TB, opts *Options) *Broker {
	t.Helper()
	u := natsURL(t)
	t.Cleanup(func() {
		nc, err := natsgo.Connect(u)
		if err != nil {
			t.Errorf("connect to delete stream: %v", err)
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := js.DeleteStream(ctx, opts.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", opts.Stream, err)
		}
		if err := js.DeleteKeyValue(ctx, opts.Stream+"_leases"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("delete lease bucket of %s: %v", opts.Stream, err)
		}
	})
	b, err := Open(t.Context(), u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// openEmbedded opens a broker on an embedded server storing in dir.
func openEmbedded(t testing.TB, dir string, opts *Options) *Broker {
	t.Helper()
	b, err := openServed(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// queueSize is the MaxPending of the conformance suite's brokers.
const queueSize = 16

var features = brokertest.Features{
	// MaxPending bounds the stream, which each subtest has to itself.
	QueueSize: queueSize,
}

// conformanceOptions returns test options with a bound on the stream.
func conformanceOptions() *Options {
	o := testOptions()
	o.MaxPending = queueSize
	return o
}

// crash abandons b as a killed process would: the connection drops, and
// an embedded server stops, without waiting for the handlers, so that
// their acknowledgements are lost.
func crash(b calf.Broker) {
	nb := b.(*Broker)
	nb.closed.Store(true)
	nb.nc.Close()
	if nb.afterClose != nil {
		nb.afterClose()
	}
}

// lockedBuffer is a buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failureLog returns a logger whose debug output the test shows if it
// fails: which partitions were taken over with how many messages
// outstanding, what was handed back.
func failureLog(t *testing.T) *slog.Logger {
	var buf lockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the brokers' log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestConformanceExternal(t *testing.T) {
	natsURL(t)
	f := features
	f.Durable = func(t *testing.T) func() calf.Broker {
		opts := testOptions()
		opts.Logger = failureLog(t)
		var first atomic.Bool
		return func() calf.Broker {
			if !first.Swap(true) {
				return openExternal(t, opts) // deletes the stream at the end
			}
			b, err := Open(t.Context(), natsURL(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		}
	}
	f.Crash = crash
	brokertest.Run(t, func(t *testing.T) calf.Broker {
		return openExternal(t, conformanceOptions())
	}, f)
}

func TestConformanceEmbedded(t *testing.T) {
	f := features
	f.Durable = func(t *testing.T) func() calf.Broker {
		dir, opts := t.TempDir(), testOptions()
		opts.Logger = failureLog(t)
		return func() calf.Broker { return openEmbedded(t, dir, opts) }
	}
	// The embedded server holds its directory.
	f.SingleInstance = true
	f.Crash = crash
	brokertest.Run(t, func(t *testing.T) calf.Broker {
		return openEmbedded(t, t.TempDir(), conformanceOptions())
	}, f)
}

// backends runs f against a broker factory for each backend. Brokers from
// one factory share a stream.
func backends(t *testing.T, f func(t *testing.T, open func() *Broker)) {
	backendsWith(t, nil, f)
}

// backendsWith is backends with the test options changed by set.
func backendsWith(t *testing.T, set func(*Options), f func(t *testing.T, open func() *Broker)) {
	options := func() *Options {
		o := testOptions()
		if set != nil {
			set(o)
		}
		return o
	}
	t.Run("external", func(t *testing.T) {
		natsURL(t)
		opts := options()
		var first atomic.Bool
		f(t, func() *Broker {
			if !first.Swap(true) {
				return openExternal(t, opts)
			}
			b, err := Open(t.Context(), natsURL(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		})
	})
	t.Run("embedded", func(t *testing.T) {
		var (
			mu sync.Mutex
			b  *Broker
		)
		f(t, func() *Broker {
			mu.Lock()
			defer mu.Unlock()
			if b != nil {
				t.Skip("an embedded server serves a single broker")
			}
			b = openEmbedded(t, t.TempDir(), options())
			return b
		})
	})
}

type handled struct {
	ID      string
	Attempt int
}

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

func (r *recorder) waitN(t *testing.T, what string, n int) []handled {
	t.Helper()
	return r.waitFor(t, what, func(c []handled) bool { return len(c) >= n })
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

// TestOrderUnderRedelivery checks that a message that fails is redelivered
// before the later messages of its key, though JetStream redelivers a
// refused message after later ones.
func TestOrderUnderRedelivery(t *testing.T) {
	backends(t, func(t *testing.T, open func() *Broker) {
		b := open()
		rec := newRecorder()
		subscribe(t, b, "ord.x", func(ctx context.Context, m *calf.Message) error {
			rec.add(m)
			if m.ID == "m1" && m.Metadata.Attempt <= 2 {
				return errors.New("fails twice")
			}
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("ord.x", "k", "m1"), msg("ord.x", "k", "m2"), msg("ord.x", "k", "m3"))
		got := rec.waitN(t, "every message", 5)
		want := []handled{{"m1", 1}, {"m1", 2}, {"m1", 3}, {"m2", 1}, {"m3", 1}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("deliveries (-want +got):\n%s", diff)
		}
	})
}

// TestKeysOfOtherPartitionsGoOn checks that a key held by a failing
// message holds up neither the keys of other partitions nor more
// than its own partition.
func TestKeysOfOtherPartitionsGoOn(t *testing.T) {
	backends(t, func(t *testing.T, open func() *Broker) {
		b := open()
		n := b.opts.Partitions
		held := "held"
		other := ""
		for i := 0; other == ""; i++ {
			if k := "k" + strconv.Itoa(i); Partition(k, "", n) != Partition(held, "", n) {
				other = k
			}
		}
		release := make(chan struct{})
		rec := newRecorder()
		subscribe(t, b, "par.x", func(ctx context.Context, m *calf.Message) error {
			if m.Key == held {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			rec.add(m)
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		publish(t, b, msg("par.x", held, "h1"), msg("par.x", other, "o1"), msg("par.x", other, "o2"))
		got := rec.waitN(t, "the other key", 2)
		close(release)
		if diff := cmp.Diff([]handled{{"o1", 1}, {"o2", 1}}, got); diff != "" {
			t.Errorf("deliveries while a key is held (-want +got):\n%s", diff)
		}
		rec.waitN(t, "the held key", 3)
	})
}

// TestWorkersShareGroup checks that two brokers on one stream, in one
// group, share its messages, each handled once. The first member to join
// claims every partition at once; it hands the second member its share on
// a later lease tick, so messages are sent in batches until both have
// taken part.
func TestWorkersShareGroup(t *testing.T) {
	natsURL(t)
	opts := testOptions()
	w1 := openExternal(t, opts)
	w2, err := Open(t.Context(), natsURL(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w2.Close() })
	var mu sync.Mutex
	seen := map[string]int{}
	byWorker := map[int]int{}
	rec := newRecorder()
	for i, w := range []*Broker{w1, w2} {
		subscribe(t, w, "work.>", func(ctx context.Context, m *calf.Message) error {
			mu.Lock()
			seen[m.ID]++
			byWorker[i]++
			mu.Unlock()
			rec.add(m)
			return nil
		}, &calf.SubscribeOptions{Group: "workers"})
	}
	const batch, atLeast = 20, 200
	want := map[string]int{}
	both := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return byWorker[0] > 0 && byWorker[1] > 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for sent := 0; sent < atLeast || !both(); {
		if time.Now().After(deadline) {
			break
		}
		for range batch {
			id := "m" + strconv.Itoa(sent)
			want[id] = 1
			publish(t, w1, msg("work.x", "k"+strconv.Itoa(sent%50), id))
			sent++
		}
		rec.waitN(t, "every message sent", len(want))
		if !both() {
			// The next batch reaches both once they share the partitions.
			waitShared(t, w1, "workers", 2)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("deliveries per message (-want +got):\n%s", diff)
	}
	if byWorker[0] == 0 || byWorker[1] == 0 {
		t.Errorf("messages handled per worker after %d sent: %v; want both to take part", len(want), byWorker)
	}
}

// waitShared waits until every partition of group is leased and n members
// hold leases: the members have shared the partitions.
func waitShared(t *testing.T, b *Broker, group string, n int) {
	t.Helper()
	kv, err := b.leaseBucket(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	prefix := leasePrefix(group)
	testwait.ForErr(t, 20*time.Second, "the partitions of group "+group+" shared", func() error {
		holders := map[string]int{}
		for p := range b.opts.Partitions {
			if e, err := kv.Get(t.Context(), prefix+"p."+strconv.Itoa(p)); err == nil {
				holders[string(e.Value())]++
			}
		}
		total := 0
		for _, c := range holders {
			total += c
		}
		if len(holders) == n && total == b.opts.Partitions {
			return nil
		}
		return fmt.Errorf("partitions held per member %v; want all %d shared by %d members", holders, b.opts.Partitions, n)
	})
}

// TestRestartKeepsUnhandled checks that messages not yet handled by a
// group survive a restart of the embedded server.
func TestRestartKeepsUnhandled(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	b, err := openServed(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	sub, err := b.Subscribe(t.Context(), "rs.x", func(ctx context.Context, m *calf.Message) error {
		if m.ID == "m1" {
			close(started)
		}
		<-ctx.Done() // interrupted by the close
		return ctx.Err()
	}, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, msg("rs.x", "k", "m1"), msg("rs.x", "k", "m2"))
	<-started
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	publish(t, b, msg("rs.x", "j", "m3"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openEmbedded(t, dir, opts)
	rec := newRecorder()
	subscribe(t, b, "rs.x", func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		return nil
	}, &calf.SubscribeOptions{Group: "g"})
	got := rec.waitN(t, "messages after the restart", 3)
	var ids []string
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if i1, i2 := slices.Index(ids, "m1"), slices.Index(ids, "m2"); i1 < 0 || i2 < i1 || !slices.Contains(ids, "m3") {
		t.Errorf("after the restart handled %v, want m1 before m2, and m3", ids)
	}
	if got[slices.Index(ids, "m1")].Attempt != 2 {
		t.Errorf("m1 redelivered as attempt %d, want 2", got[slices.Index(ids, "m1")].Attempt)
	}
}

// TestGroupPattern checks that a group keeps its pattern.
func TestGroupPattern(t *testing.T) {
	b := openEmbedded(t, t.TempDir(), testOptions())
	h := func(context.Context, *calf.Message) error { return nil }
	subscribe(t, b, "gp.a", h, &calf.SubscribeOptions{Group: "g"})
	if sub, err := b.Subscribe(t.Context(), "gp.b", h, &calf.SubscribeOptions{Group: "g"}); !errors.Is(err, ErrGroupPattern) {
		if sub != nil {
			_ = sub.Close()
		}
		t.Errorf("Subscribe with another pattern = %v, want ErrGroupPattern", err)
	}
	subscribe(t, b, "gp.a", h, &calf.SubscribeOptions{Group: "g"})
}

// TestUndecodableIsParked checks that a payload that is not a message
// envelope is parked with its bytes, and that its key's partition goes on.
func TestUndecodableIsParked(t *testing.T) {
	opts := testOptions()
	b := openEmbedded(t, t.TempDir(), opts)
	dead := make(chan *calf.DeadLetter, 2)
	subscribe(t, b, calf.DeadLetterChannel, func(ctx context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := m.Decode(&dl); err != nil {
			t.Error(err)
		}
		dead <- &dl
		return nil
	}, nil)
	rec := newRecorder()
	subscribe(t, b, "bad.>", func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		return nil
	}, &calf.SubscribeOptions{Group: "g"})
	p := Partition("k", "", opts.Partitions)
	tests := []struct {
		subject, data string
	}{
		{subject(opts.Prefix, p, "bad.x"), "not json"},
		{subject(opts.Prefix, p, "bad.x"), `{"channel":"other.channel"}`},
	}
	for _, tc := range tests {
		if _, err := b.js.PublishMsg(t.Context(), &natsgo.Msg{Subject: tc.subject, Data: []byte(tc.data)}, jetstream.WithMsgID("raw-"+tc.data)); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, b, msg("bad.x", "k", "good"))
	// The dead letters may arrive in either order: match them by id.
	byID := map[string]*calf.DeadLetter{}
	for range tests {
		select {
		case dl := <-dead:
			byID[dl.Message.ID] = dl
		case <-time.After(timeout):
			t.Fatal("no dead letter")
		}
	}
	for _, tc := range tests {
		dl := byID["raw-"+tc.data]
		if dl == nil {
			t.Errorf("no dead letter for %q; got %v", tc.data, byID)
			continue
		}
		raw := string(dl.RawData)
		if raw == "" {
			raw = string(dl.Message.Data)
		}
		if raw != tc.data || !dl.Permanent || dl.Group != "g" || !strings.Contains(dl.Error, "malformed") {
			t.Errorf("dead letter %+v, want raw data %q, permanent, group g, a wire error", dl, tc.data)
		}
		if dl.Message.Channel != "bad.x" {
			t.Errorf("dead letter of message %q on %q, want bad.x", dl.Message.ID, dl.Message.Channel)
		}
	}
	got := rec.waitN(t, "the good message", 1)
	if diff := cmp.Diff([]handled{{"good", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestDuplicateIDsDropped checks that a message published twice within
// the duplicate window is delivered once.
func TestDuplicateIDsDropped(t *testing.T) {
	b := openEmbedded(t, t.TempDir(), testOptions())
	rec := newRecorder()
	subscribe(t, b, "dup.x", func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		return nil
	}, nil)
	publish(t, b, msg("dup.x", "k", "m1"), msg("dup.x", "k", "m1"), msg("dup.x", "k", "m2"))
	got := rec.waitFor(t, "m2", func(c []handled) bool { return slices.Contains(c, handled{"m2", 1}) })
	if diff := cmp.Diff([]handled{{"m1", 1}, {"m2", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestLongHandlerIsNotRedelivered checks that a handler running longer
// than the ack wait keeps its message.
func TestLongHandlerIsNotRedelivered(t *testing.T) {
	opts := testOptions()
	opts.AckWait = 300 * time.Millisecond
	b := openEmbedded(t, t.TempDir(), opts)
	rec := newRecorder()
	h := func(ctx context.Context, m *calf.Message) error {
		rec.add(m)
		if m.ID == "slow" {
			select {
			case <-time.After(5 * opts.AckWait):
			case <-ctx.Done():
			}
		}
		return nil
	}
	// Two members: a redelivery would reach the idle one at once. They
	// share the partitions before the messages come, so that none moves
	// (handing back the message waiting behind the slow one) meanwhile.
	subscribe(t, b, "long.x", h, &calf.SubscribeOptions{Group: "g"})
	subscribe(t, b, "long.x", h, &calf.SubscribeOptions{Group: "g"})
	waitShared(t, b, "g", 2)
	publish(t, b, msg("long.x", "k", "slow"), msg("long.x", "k", "next"))
	got := rec.waitN(t, "both messages", 2)
	if diff := cmp.Diff([]handled{{"slow", 1}, {"next", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := openServed(t.Context(), t.TempDir(), &Options{Prefix: "a.b"}); err == nil {
		t.Error("a broker with a prefix of two tokens opened")
	}
	if _, err := OpenConn(t.Context(), nil, nil); err == nil {
		t.Error("OpenConn without a connection succeeded")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := Open(ctx, "nats://127.0.0.1:1", nil); err == nil {
		t.Error("Open of an address nobody listens on succeeded")
	}
}

func TestConsumerName(t *testing.T) {
	tests := []struct{ group, prefix string }{
		{"workers", "workers_"},
		{"a.b c*>/\\", "a_b_c____"},
		{"été", "_t_"},
		{strings.Repeat("x", 100), strings.Repeat("x", 32) + "_"},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		name := ConsumerName(tc.group, 3)
		if !strings.HasPrefix(name, tc.prefix) || !strings.HasSuffix(name, "_p3") || strings.ContainsAny(name, ". *>/\\") {
			t.Errorf("ConsumerName(%q) = %q", tc.group, name)
		}
		if seen[name] {
			t.Errorf("ConsumerName(%q) = %q, a name given to another group", tc.group, name)
		}
		seen[name] = true
	}
}

// TestHandledMessagesLeaveTheStream checks that the stream keeps a message
// only until every group it matches has handled or parked it.
func TestHandledMessagesLeaveTheStream(t *testing.T) {
	backends(t, func(t *testing.T, open func() *Broker) {
		b := open()
		rec := newRecorder()
		subscribe(t, b, "st.x", func(ctx context.Context, m *calf.Message) error {
			rec.add(m)
			if m.ID == "poison" {
				return calf.Permanent(errors.New("poison"))
			}
			return nil
		}, &calf.SubscribeOptions{Group: "g"})
		held := subscribe(t, b, "st.>", func(ctx context.Context, m *calf.Message) error {
			<-ctx.Done()
			return ctx.Err()
		}, &calf.SubscribeOptions{Group: "slow"})
		publish(t, b, msg("st.x", "k", "ok"), msg("st.x", "k", "poison"), msg("st.y", "j", "y"))
		rec.waitN(t, "both messages", 2)
		// The dead letter matches no group. What group slow holds stays
		// after its member leaves.
		if err := held.Close(); err != nil {
			t.Fatal(err)
		}
		waitStreamMsgs(t, b, 3)
		if err := b.js.DeleteConsumer(t.Context(), b.opts.Stream, ConsumerName("slow", Partition("k", "", b.opts.Partitions))); err != nil {
			t.Fatal(err)
		}
		if err := b.js.DeleteConsumer(t.Context(), b.opts.Stream, ConsumerName("slow", Partition("j", "", b.opts.Partitions))); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		waitStreamMsgs(t, b, 0)
	})
}

// waitStreamMsgs waits until b's stream holds n messages.
func waitStreamMsgs(t *testing.T, b *Broker, n uint64) {
	t.Helper()
	testwait.ForErr(t, timeout, fmt.Sprintf("the stream to hold %d messages", n), func() error {
		st, err := b.js.Stream(t.Context(), b.opts.Stream)
		if err != nil {
			return err
		}
		if got := st.CachedInfo().State.Msgs; got != n {
			return fmt.Errorf("it holds %d", got)
		}
		return nil
	})
}

// TestPublishFromHandlerNeverBlocks checks that MaxPending does not hold
// back the output of handlers, with the handler's context or one derived
// from it.
func TestPublishFromHandlerNeverBlocks(t *testing.T) {
	opts := testOptions()
	opts.MaxPending = 1
	b := openEmbedded(t, t.TempDir(), opts)
	release := make(chan struct{})
	rec := newRecorder()
	subscribe(t, b, "chain.out", func(ctx context.Context, m *calf.Message) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		rec.add(m)
		return nil
	}, &calf.SubscribeOptions{Group: "out"})
	done := make(chan error, 1)
	subscribe(t, b, "chain.in", func(ctx context.Context, m *calf.Message) error {
		ctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		for i := range 5 {
			if err := b.Publish(ctx, msg("chain.out", "k", "out"+strconv.Itoa(i))); err != nil {
				done <- err
				return err
			}
		}
		done <- nil
		return nil
	}, &calf.SubscribeOptions{Group: "in"})
	publish(t, b, msg("chain.in", "k", "in"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		t.Fatal("a handler's publishes blocked on a full stream")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := b.Publish(ctx, msg("chain.in", "k", "refused")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish to a full stream = %v, want an error matching context.DeadlineExceeded", err)
	}
	close(release)
	rec.waitN(t, "the handler's output", 5)
}

// BenchmarkPublishHandle measures a message's way through an embedded
// server, from Publish to the end of its handler, with as many keys in
// flight as partitions.
func BenchmarkPublishHandle(b *testing.B) {
	brokertest.PublishHandleBenchmark(b, openEmbedded(b, b.TempDir(), testOptions()))
}

// TestCloseWhileAPartitionStarts checks that a member that closes while it
// is starting to consume a partition it has just taken stops that
// consumption too: left running, it took the messages it had handed back
// again at once, handed them back again, and so on, each round a handled,
// until the server dropped them at the consumer's limit of deliveries.
func TestCloseWhileAPartitionStarts(t *testing.T) {
	backendsWith(t, func(o *Options) { o.Partitions = 1 }, func(t *testing.T, open func() *Broker) {
		b := open()
		opts := &calf.SubscribeOptions{Group: "g"}
		// A member's first claims come before Subscribe returns: member a
		// takes the partition later, from a member that held it first.
		holder, err := b.Subscribe(t.Context(), "cs.x", func(context.Context, *calf.Message) error {
			return errors.New("the first holder must not handle anything")
		}, opts)
		if err != nil {
			t.Fatal(err)
		}
		listed := make(chan *part, 1)
		proceed := make(chan struct{})
		hook := func(pt *part) {
			if pt.s.group != "g" || pt.s == holder.(*subscription) {
				return
			}
			select {
			case listed <- pt:
				<-proceed
			default:
			}
		}
		testHookListed.Store(&hook)
		t.Cleanup(func() { testHookListed.Store(nil) })

		a, err := b.Subscribe(t.Context(), "cs.x", func(context.Context, *calf.Message) error {
			return errors.New("member a must not handle anything")
		}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Close(); err != nil {
			t.Fatal(err)
		}
		const n = 3
		var pt *part
		select {
		case pt = <-listed:
		case <-time.After(timeout):
			t.Fatal("member a did not take the partition")
		}
		// The messages wait in the consumer while a sets up its
		// consumption of the partition.
		for i := range n {
			publish(t, b, msg("cs.x", "k", "m"+strconv.Itoa(i)))
		}
		// Close a while its consumption of the partition is being set up,
		// and let the setup go on once the partition is given up.
		closed := make(chan error, 1)
		go func() { closed <- a.Close() }()
		brokertest.WaitUntil(t, "the partition given up", func() bool {
			pt.mu.Lock()
			defer pt.mu.Unlock()
			return pt.gone
		})
		close(proceed)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}

		rec := newRecorder()
		subscribe(t, b, "cs.x", func(_ context.Context, m *calf.Message) error {
			rec.add(m)
			return nil
		}, opts)
		got := rec.waitN(t, "the messages, by the next member", n)
		for i, d := range got[:n] {
			if want := "m" + strconv.Itoa(i); d.ID != want || d.Attempt > 3 {
				t.Errorf("handled %d: %s as attempt %d, want %s as attempt 3 at most", i, d.ID, d.Attempt, want)
			}
		}
	})
}

// TestStaleMemberIsLeftOut checks that a member whose announcement has not
// been renewed for three ticks is left out of the sharing of partitions
// while its announcement has yet to expire: the partitions it would be
// given go to live members.
func TestStaleMemberIsLeftOut(t *testing.T) {
	natsURL(t)
	opts := testOptions()
	opts.AckWait = 6 * time.Second // announcements last 6 s; stale after 3 s
	b := openExternal(t, opts)
	sub := subscribe(t, b, "stale.x", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	l := sub.(*subscription).lease
	// A member that announces itself once and dies: its id sorts first.
	dead := "0dead"
	if _, err := l.kv.Put(t.Context(), l.prefix+"m."+dead, nil); err != nil {
		t.Fatal(err)
	}
	members := func() []string {
		rev, err := l.kv.Put(t.Context(), l.prefix+"m."+l.id, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.members(t.Context(), rev)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := members(); !slices.Contains(got, dead) {
		t.Fatalf("members just after the other announced itself: %v; want it in", got)
	}
	time.Sleep(l.staleAfter() + l.every)
	if _, err := l.kv.Get(t.Context(), l.prefix+"m."+dead); err != nil {
		t.Fatalf("the dead member's announcement expired already (%v): the test cannot tell", err)
	}
	if diff := cmp.Diff([]string{l.id}, members()); diff != "" {
		t.Errorf("members once the other missed three renewals (-want +got):\n%s", diff)
	}
	// Every partition stays with the live member.
	waitShared(t, b, "g", 1)
}

// TestPreparedGroupKeepsEarlyMessages checks that a group prepared before
// it has any member gets the messages published before its first member
// subscribed, which a group not prepared never sees (the stream keeps a
// message only for the groups that exist), and that preparing refuses a
// group that exists with another pattern.
func TestPreparedGroupKeepsEarlyMessages(t *testing.T) {
	natsURL(t)
	b := openExternal(t, testOptions())
	if err := b.PrepareGroup(t.Context(), "early.x", "prepared"); err != nil {
		t.Fatal(err)
	}
	// Preparing again, or once a member has joined, changes nothing.
	if err := calf.PrepareGroup(t.Context(), b, "early.x", "prepared"); err != nil {
		t.Fatal(err)
	}
	publish(t, b, msg("early.x", "k1", "m1"), msg("early.x", "k2", "m2"))
	n, err := b.GroupMembers(t.Context(), "prepared")
	if err != nil || n != 0 {
		t.Errorf("members of a prepared group nobody joined: %d, %v; want 0", n, err)
	}
	rec := newRecorder()
	subscribe(t, b, "early.x", func(ctx context.Context, m *calf.Message) error { rec.add(m); return nil }, &calf.SubscribeOptions{Group: "prepared"})
	got := rec.waitN(t, "the messages sent before the first member", 2)
	slices.SortFunc(got, func(a, b handled) int { return strings.Compare(a.ID, b.ID) })
	if diff := cmp.Diff([]handled{{"m1", 1}, {"m2", 1}}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}

	// Without preparing: the message sent before the group existed is gone.
	publish(t, b, msg("late.x", "k1", "lost"))
	rec2 := newRecorder()
	subscribe(t, b, "late.x", func(ctx context.Context, m *calf.Message) error { rec2.add(m); return nil }, &calf.SubscribeOptions{Group: "unprepared"})
	publish(t, b, msg("late.x", "k1", "kept"))
	if got := rec2.waitN(t, "the message sent after the first member", 1); got[0].ID != "kept" {
		t.Errorf("an unprepared group got %v first; want only the message sent once it existed", got)
	}

	if err := b.PrepareGroup(t.Context(), "other.x", "prepared"); !errors.Is(err, ErrGroupPattern) {
		t.Errorf("preparing a group with another pattern: %v; want ErrGroupPattern", err)
	}
	if err := b.PrepareGroup(t.Context(), "early.x", ""); err == nil {
		t.Error("preparing a group without a name succeeded")
	}
}

// TestMembersWithoutTheWatch checks that a member whose watch of the
// announcements has ended still reads the members, by listing them, and
// watches again on the next call; and that the watch shows a member that
// announced itself after it started.
func TestMembersWithoutTheWatch(t *testing.T) {
	b := openExternal(t, testOptions())
	sub := subscribe(t, b, "watch.x", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	l := sub.(*subscription).lease
	announce := func(id string) uint64 {
		t.Helper()
		rev, err := l.kv.Put(t.Context(), l.prefix+"m."+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	other := "0other"
	announce(other)
	got, err := l.members(t.Context(), announce(l.id))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, other) || !slices.Contains(got, l.id) {
		t.Fatalf("members through the watch: %v; want %s and %s", got, other, l.id)
	}
	// The watch ends under the member: the next call lists.
	l.rmu.Lock()
	r := l.roster
	l.rmu.Unlock()
	if r == nil {
		t.Fatal("no watch after a tick")
	}
	r.stop()
	brokertest.WaitUntil(t, "the watch ended", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.failed
	})
	got, err = l.members(t.Context(), announce(l.id))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, other) || !slices.Contains(got, l.id) {
		t.Fatalf("members once the watch ended: %v; want %s and %s", got, other, l.id)
	}
	brokertest.WaitUntil(t, "a new watch", func() bool {
		if _, err := l.members(t.Context(), announce(l.id)); err != nil {
			t.Fatal(err)
		}
		l.rmu.Lock()
		defer l.rmu.Unlock()
		return l.roster != nil && l.roster != r
	})
}
