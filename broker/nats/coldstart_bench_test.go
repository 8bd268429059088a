package nats

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// BenchmarkColdStart measures how long 64 messages, published as soon as
// the only member of a group has subscribed, take to be delivered: what a
// worker that has just started costs the runs sent to it at once.
func BenchmarkColdStart(b *testing.B) {
	for i := range b.N {
		b.StopTimer()
		br, err := openServed(context.Background(), b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		var n atomic.Int32
		done := make(chan struct{})
		b.StartTimer()
		if _, err := br.Subscribe(context.Background(), "cs.x", func(context.Context, *calf.Message) error {
			if n.Add(1) == 64 {
				close(done)
			}
			return nil
		}, &calf.SubscribeOptions{Group: "g"}); err != nil {
			b.Fatal(err)
		}
		for j := range 64 {
			m := &calf.Message{ID: fmt.Sprintf("r%d-%d", i, j), Channel: "cs.x", Key: fmt.Sprintf("k%d", j), Data: []byte(`{}`)}
			if err := br.Publish(context.Background(), m); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatal("the messages were not delivered within a minute")
		}
		b.StopTimer()
		_ = br.Close()
	}
}
