package brokertest

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// PublishHandleBenchmark measures a message's way through b, from Publish
// to the end of its handler, in one consumer group, with 16 keys in
// flight. It waits, after the timed loop, until every message is handled.
func PublishHandleBenchmark(tb *testing.B, b calf.Broker) {
	var handled, want atomic.Int64
	want.Store(-1)
	done := make(chan struct{}, 1)
	sub, err := b.Subscribe(tb.Context(), "bench.x", func(context.Context, *calf.Message) error {
		if handled.Add(1) == want.Load() {
			done <- struct{}{}
		}
		return nil
	}, &calf.SubscribeOptions{Group: "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	defer sub.Close()
	data := json.RawMessage(`{"content":"hello"}`)
	tb.ReportAllocs()
	n := int64(0)
	for tb.Loop() {
		m := &calf.Message{ID: calf.NewID(), Channel: "bench.x", Key: "run-" + strconv.FormatInt(n%16, 10), Data: data}
		if err := b.Publish(tb.Context(), m); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	want.Store(n)
	if handled.Load() < n {
		select {
		case <-done:
		case <-time.After(time.Minute):
			tb.Fatalf("handled %d of %d", handled.Load(), n)
		}
	}
}
