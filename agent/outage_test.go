package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// downStore is a store that a test takes down: while down, every operation
// fails as a database that refuses connections does.
type downStore struct {
	store.Store
	down   atomic.Bool
	failed atomic.Int64
}

func (s *downStore) fail() error {
	s.failed.Add(1)
	return calf.Unavailable(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
}

func (s *downStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if s.down.Load() {
		return store.Record{}, s.fail()
	}
	return s.Store.Get(ctx, kind, id)
}

func (s *downStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if s.down.Load() {
		return 0, s.fail()
	}
	return s.Store.Put(ctx, kind, id, data, version)
}

func (s *downStore) Delete(ctx context.Context, kind, id string, version int64) error {
	if s.down.Load() {
		return s.fail()
	}
	return s.Store.Delete(ctx, kind, id, version)
}

func (s *downStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if s.down.Load() {
		return nil, s.fail()
	}
	return s.Store.List(ctx, kind, prefix, after, limit)
}

// A run whose store goes down for a while in the middle of each step,
// far longer than its handlers' attempts last, completes once the store is
// back, with its tool executed once, nothing parked, and its caller (on
// the same store) given the answer rather than the outage.
func TestRunSurvivesAStoreOutage(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			e := newEnv(t, &envOptions{wrap: proto.wrap})
			ds := &downStore{Store: e.store}
			rt := agent.NewRuntime(e.client, ds, nil)
			// The store goes down as the model answers and as the tool
			// runs, and comes back 600 ms later each time: the handlers
			// that record the answer and the tool's result meet the
			// outage.
			var calls atomic.Int64
			var outages sync.Map // by the request's message count: once per step
			outage := func(req *model.Request) {
				step := -1 // the tool's
				if req != nil {
					step = len(req.Messages)
				}
				if _, again := outages.LoadOrStore(step, true); again {
					return
				}
				ds.down.Store(true)
				time.AfterFunc(600*time.Millisecond, func() { ds.down.Store(false) })
			}
			m := w1Model(&calls)
			var toolCalls atomic.Int64
			add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
				toolCalls.Add(1)
				outage(nil) // the tool's result meets the outage
				return in.A + in.B, nil
			}))
			a, err := agent.New("calculator", modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
				resp, err := m.Generate(ctx, req)
				outage(req)
				return resp, err
			}), &agent.Options{Tools: []tool.Tool{add}})
			if err != nil {
				t.Fatal(err)
			}
			// Two attempts 1 ms apart: without outage retries the first
			// failure of a write would park its message.
			if err := a.Serve(t.Context(), rt, &agent.ServeOptions{MaxAttempts: 2}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			out, err := a.Run(ctx, rt, "add 2 and 3", nil)
			if err != nil {
				ids, _ := e.eventIDs("calf.>")
				t.Fatalf("run through the outage: %v\nbroker %+v, store failures %d, events %v", err, e.broker.Stats(), ds.failed.Load(), ids)
			}
			if out.Output != "The sum is 5" {
				t.Errorf("output %q", out.Output)
			}
			e.settle(t)
			if n := toolCalls.Load(); n != 1 {
				t.Errorf("the tool ran %d times", n)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the model was called %d times, want 2: an answer it gave was asked for again", n)
			}
			if n := ds.failed.Load(); n == 0 {
				t.Error("no operation met the outage")
			}
			// The model's answer and the tool's result, costly to get,
			// are recorded through the outage by their handlers, in
			// place: nothing is delivered again for them.
			if st := e.broker.Stats(); st.DeadLettered != 0 {
				t.Errorf("broker stats %+v: want no dead letter", st)
			}
		})
	}
}
