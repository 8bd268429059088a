package host_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
)

// dropOutputs is a broker that loses the outputs of the host's runs, as a
// process that ends after a run's end is recorded and before its output
// is handled does.
type dropOutputs struct{ calf.Broker }

func (d dropOutputs) Publish(ctx context.Context, msg *calf.Message) error {
	if msg.Channel == "calf.convhost.output" {
		return nil
	}
	return d.Broker.Publish(ctx, msg)
}

func (d dropOutputs) Unwrap() calf.Broker { return d.Broker }

// lastUserText is the text of the last user message of a request.
func lastUserText(req *model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == model.RoleUser {
			return m.Text()
		}
	}
	return ""
}

// inboxOf reads the queue record of the conversation's entry instance.
func inboxOf(t *testing.T, st store.Store, c conversation.Conversation) (current bool, queued int) {
	t.Helper()
	rec, err := st.Get(t.Context(), "conversation_inbox", c.ID+"/"+c.Entry)
	if err != nil {
		return false, 0
	}
	var b struct {
		Current json.RawMessage   `json:"current"`
		Queue   []json.RawMessage `json:"queue"`
	}
	if err := json.Unmarshal(rec.Data, &b); err != nil {
		t.Fatal(err)
	}
	return len(b.Current) > 0 && string(b.Current) != "null", len(b.Queue)
}

// TestHostRecover: a process serving a conversation on the in-memory
// broker and SQLite ends while a message is being answered, another
// waiting behind it; a new process on the same store, its host recovered,
// answers both, each once, in order. On NATS, which delivers again what
// the first process left in flight, two hosts recovering at once have
// nothing answered twice either.
func TestHostRecover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// complete has the first process complete the run and lose its
		// output, rather than end in the middle of the run.
		complete bool
		// hosts is how many hosts on one broker recover at once.
		hosts int
		// nats runs both processes on an embedded NATS server, which
		// keeps what the first left in flight and delivers it again:
		// Recover must not have it answered twice.
		nats bool
	}{
		{name: "run unfinished", hosts: 1},
		{name: "answer not sent", complete: true, hosts: 1},
		{name: "two hosts on NATS", hosts: 2, nats: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "calf.db")
			natsDir := t.TempDir()
			openBroker := func() calf.Broker {
				if !tc.nats {
					return memory.New(nil)
				}
				b, err := embedded.Open(ctx, natsDir, &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}

			// The first process.
			st1, err := sqlite.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			b1 := openBroker()
			var started atomic.Bool
			var m1 model.Model = modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
				started.Store(true)
				if tc.complete {
					return modeltest.Text("answer to " + lastUserText(req)), nil
				}
				<-ctx.Done() // the process ends in the middle of the call
				return nil, ctx.Err()
			})
			var br calf.Broker = b1
			if tc.complete {
				br = dropOutputs{b1}
			}
			e1 := newHost(t, br, st1, m1, nil)
			c := e1.create()
			e1.say(c, "first")
			testwait.For(t, 20*time.Second, "the first run to call the model", started.Load)
			e1.say(c, "second")
			testwait.For(t, 20*time.Second, "the second message to be queued", func() bool {
				cur, q := inboxOf(t, st1, c)
				return cur && q == 1
			})
			if tc.complete {
				if err := b1.(*memory.Broker).Drain(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := e1.wait(c, 0); len(got) != 0 {
				t.Fatalf("answers before the first process ended: %+v", got)
			}
			if err := b1.Close(); err != nil {
				t.Fatal(err)
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = e1.client.Shutdown(sctx)
			cancel()
			if err := st1.Close(); err != nil {
				t.Fatal(err)
			}

			// The next process, on the same store.
			st2, err := sqlite.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st2.Close() })
			b2 := openBroker()
			t.Cleanup(func() { b2.Close() })
			var mu sync.Mutex
			calls := map[string]int{}
			m2 := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
				text := lastUserText(req)
				mu.Lock()
				calls[text]++
				mu.Unlock()
				return modeltest.Text("answer to " + text), nil
			})
			e2 := newHost(t, b2, st2, m2, nil)
			hosts := []*host.Host{e2.host}
			for range tc.hosts - 1 {
				// Another host on the same broker and store, without a
				// user's side of its own.
				client := calf.NewClient(b2, nil)
				t.Cleanup(func() { _ = client.Shutdown(context.Background()) })
				h := host.New(agent.NewRuntime(client, st2, nil), conversation.NewConversations(st2, nil), &host.Options{
					Model: func(string) (model.Model, error) { return m2, nil },
					Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(st2, nil).CodeHandler()},
				})
				if err := h.Serve(ctx); err != nil {
					t.Fatal(err)
				}
				hosts = append(hosts, h)
			}
			var wg sync.WaitGroup
			var recovered atomic.Int64
			for _, h := range hosts {
				wg.Go(func() {
					n, err := h.Recover(ctx)
					if err != nil {
						t.Error(err)
					}
					recovered.Add(int64(n))
				})
			}
			wg.Wait()
			// On NATS the broker may have carried the message on before
			// Recover reads the queue.
			if n := recovered.Load(); (n < 1 && !tc.nats) || n > int64(tc.hosts) {
				t.Fatalf("Recover carried on %d messages over %d hosts, want 1 each at most and 1 at least on the in-memory broker", n, tc.hosts)
			}
			e2.wait(c, 2)
			// settle waits until the host has nothing in hand: every
			// message handled on the in-memory broker; on NATS, which
			// cannot tell, the conversation's queue empty and no message
			// current.
			settle := func() {
				if m, ok := b2.(*memory.Broker); ok {
					if err := m.Drain(ctx); err != nil {
						t.Fatal(err)
					}
					return
				}
				testwait.For(t, 20*time.Second, "the conversation's queue to empty", func() bool {
					cur, q := inboxOf(t, st2, c)
					return !cur && q == 0
				})
			}
			settle()
			// Once more: nothing left to carry on.
			if n, err := e2.host.Recover(ctx); err != nil || n != 0 {
				t.Fatalf("Recover again: %d, %v; want 0, nil", n, err)
			}
			settle()
			e2.mu.Lock()
			got := slices.Clone(e2.answers[c.ID])
			e2.mu.Unlock()
			var texts []string
			for _, m := range got {
				texts = append(texts, m.Message)
			}
			if want := []string{"answer to first", "answer to second"}; strings.Join(texts, "|") != strings.Join(want, "|") {
				t.Fatalf("answers %q, want %q", texts, want)
			}
			mu.Lock()
			defer mu.Unlock()
			want := map[string]int{"first": 1, "second": 1}
			if tc.complete {
				want = map[string]int{"second": 1}
			}
			if len(calls) != len(want) || calls["first"] != want["first"] || calls["second"] != want["second"] {
				t.Fatalf("model calls by message %v, want %v", calls, want)
			}
			if cur, q := inboxOf(t, st2, c); cur || q != 0 {
				t.Fatalf("the queue holds a current message (%v) and %d waiting, want none", cur, q)
			}
		})
	}
}
