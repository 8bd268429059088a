package brokertest

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// env is what one subtest works with.
type env struct {
	t      *testing.T
	b      calf.Broker
	f      Features
	prefix string             // unique to this subtest run; a valid channel token
	open   func() calf.Broker // opens another broker on b's backing; durable tests only
}

// with returns a copy of e for the subtest t.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// channel returns a channel name made of the subtest's prefix and tokens.
func (e *env) channel(tokens ...string) string {
	return e.prefix + "." + strings.Join(tokens, ".")
}

// group returns a consumer group name unique to the subtest.
func (e *env) group(name string) string { return e.prefix + "-" + name }

// id returns a message id unique to the subtest.
func (e *env) id(name string) string { return e.prefix + "-" + name }

// msg returns a message with the given channel, key and id.
func (e *env) msg(channel, key, id string) *calf.Message {
	return &calf.Message{
		ID:       id,
		Channel:  channel,
		Key:      key,
		Data:     json.RawMessage(strconv.Quote(id)),
		Metadata: calf.Metadata{Time: time.Now()},
	}
}

func (e *env) subscribe(pattern string, h calf.Handler, opts *calf.SubscribeOptions) calf.Subscription {
	e.t.Helper()
	sub, err := e.b.Subscribe(e.t.Context(), pattern, h, opts)
	if err != nil {
		e.t.Fatalf("Subscribe(%q, %+v): %v", pattern, opts, err)
	}
	e.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func (e *env) publish(msgs ...*calf.Message) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), Timeout)
	defer cancel()
	for _, m := range msgs {
		if err := e.b.Publish(ctx, m); err != nil {
			e.t.Fatalf("Publish(%s on %s): %v", m.ID, m.Channel, err)
		}
	}
}

// collector records the messages a handler receives.
type collector struct {
	mu     sync.Mutex
	msgs   []*calf.Message
	notify chan struct{}
}

func newCollector() *collector { return &collector{notify: make(chan struct{}, 1)} }

func (c *collector) add(m *calf.Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// handle is a handler that records every message and acknowledges it.
func (c *collector) handle(_ context.Context, m *calf.Message) error {
	c.add(m)
	return nil
}

func (c *collector) snapshot() []*calf.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

// waitFor waits until done holds for the messages received, and returns
// them.
func (c *collector) waitFor(t *testing.T, what string, done func([]*calf.Message) bool) []*calf.Message {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	for {
		msgs := c.snapshot()
		if done(msgs) {
			return msgs
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			t.Fatalf("%s: not done after %v; received %v", what, Timeout, ids(msgs))
		}
	}
}

// waitN waits for n messages.
func (c *collector) waitN(t *testing.T, what string, n int) []*calf.Message {
	t.Helper()
	return c.waitFor(t, what, func(ms []*calf.Message) bool { return len(ms) >= n })
}

// waitID waits for the message with the given id.
func (c *collector) waitID(t *testing.T, what, id string) []*calf.Message {
	t.Helper()
	return c.waitFor(t, what, func(ms []*calf.Message) bool { return slices.Contains(ids(ms), id) })
}

func ids(msgs []*calf.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func channels(msgs []*calf.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Channel
	}
	return out
}

// wait waits for ch to be closed or to yield a value.
func wait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("%s: not done after %v", what, Timeout)
		panic("unreachable")
	}
}

// audience counts the deliveries of each message to a set of subscriptions.
type audience struct {
	name string
	mu   sync.Mutex
	seen map[string]int
	got  *collector
}

func newAudience(name string) *audience {
	return &audience{name: name, seen: map[string]int{}, got: newCollector()}
}

func (a *audience) handle(ctx context.Context, m *calf.Message) error {
	a.mu.Lock()
	a.seen[m.ID]++
	a.mu.Unlock()
	return a.got.handle(ctx, m)
}

// delivery is one handler call, as recorded by the tests.
type delivery struct {
	ID      string
	Attempt int
}
