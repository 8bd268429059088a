package brokertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

// testKeyOrder checks that the messages of each key are handled one at a
// time in publish order, by a group of one member and of several.
func testKeyOrder(e *env) {
	for _, members := range []int{1, 3} {
		e.t.Run(fmt.Sprintf("members=%d", members), func(t *testing.T) {
			e := e.with(t)
			const keys, perKey = 4, 200
			ch := e.channel("order", strconv.Itoa(members))
			var (
				mu       sync.Mutex
				seq      = map[string][]int{}
				inFlight [keys]atomic.Int32
			)
			got := newCollector()
			h := func(ctx context.Context, m *calf.Message) error {
				k, _ := strconv.Atoi(strings.TrimPrefix(m.Key, "k"))
				if n := inFlight[k].Add(1); n != 1 {
					t.Errorf("key %s: %d messages handled at once", m.Key, n)
				}
				var i int
				if err := json.Unmarshal(m.Data, &i); err != nil {
					t.Errorf("message %s: %v", m.ID, err)
				}
				if i%5 == 0 {
					runtime.Gosched()
				}
				mu.Lock()
				seq[m.Key] = append(seq[m.Key], i)
				mu.Unlock()
				inFlight[k].Add(-1)
				return got.handle(ctx, m)
			}
			for range members {
				e.subscribe(ch, h, &calf.SubscribeOptions{Group: e.group(fmt.Sprintf("order%d", members))})
			}
			for i := range perKey {
				for k := range keys {
					m := e.msg(ch, "k"+strconv.Itoa(k), e.id(fmt.Sprintf("m%d-k%d-%d", members, k, i)))
					m.Data = json.RawMessage(strconv.Itoa(i))
					e.publish(m)
				}
			}
			got.waitN(t, "every message", keys*perKey)
			want := make([]int, perKey)
			for i := range want {
				want[i] = i
			}
			mu.Lock()
			defer mu.Unlock()
			for k := range keys {
				key := "k" + strconv.Itoa(k)
				if diff := cmp.Diff(want, seq[key]); diff != "" {
					t.Errorf("key %s handled out of order (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}

// testKeysInParallel checks that a key whose handler is busy does not hold
// up another key: the handler of key a returns only once the handler of
// key b has started.
func testKeysInParallel(e *env) {
	t := e.t
	if e.f.SerializedKeys {
		t.Skip("Features.SerializedKeys: the broker may handle different keys one after another")
	}
	ch := e.channel("parallel")
	bStarted := make(chan struct{})
	closeB := sync.OnceFunc(func() { close(bStarted) })
	aDone := make(chan error, 1)
	e.subscribe(ch, func(ctx context.Context, m *calf.Message) error {
		switch m.Key {
		case "b":
			closeB()
		case "a":
			var err error
			select {
			case <-bStarted:
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(Timeout):
				err = errors.New("key b was not handled while key a's handler ran")
			}
			select {
			case aDone <- err:
			default:
			}
		}
		return nil
	}, &calf.SubscribeOptions{Group: e.group("parallel")})
	e.publish(e.msg(ch, "a", e.id("a")), e.msg(ch, "b", e.id("b")))
	if err := wait(t, "handler of key a", aDone); err != nil {
		t.Fatal(err)
	}
}

// testPublishFromHandler checks that a handler can publish with its own
// context, and that the new message is delivered.
func testPublishFromHandler(e *env) {
	t := e.t
	in, out := e.channel("chain", "in"), e.channel("chain", "out")
	got := newCollector()
	e.subscribe(in, func(ctx context.Context, m *calf.Message) error {
		for i := range 3 {
			if err := e.b.Publish(ctx, e.msg(out, m.Key, m.ID+"-out"+strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}, &calf.SubscribeOptions{Group: e.group("chain")})
	e.subscribe(out, got.handle, nil)
	var want []string
	for i := range 10 {
		id := e.id(strconv.Itoa(i))
		e.publish(e.msg(in, "k"+strconv.Itoa(i%2), id))
		for j := range 3 {
			want = append(want, id+"-out"+strconv.Itoa(j))
		}
	}
	msgs := got.waitN(t, "messages published by the handler", len(want))
	gotIDs := ids(msgs)
	slices.Sort(gotIDs)
	slices.Sort(want)
	if diff := cmp.Diff(want, gotIDs); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}
