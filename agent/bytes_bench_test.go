package agent_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// countingStore counts the bytes written to a store, by kind.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	bytes map[string]int64
}

func (s *countingStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	s.mu.Lock()
	s.bytes[kind] += int64(len(data))
	s.mu.Unlock()
	return s.Store.Put(ctx, kind, id, data, version)
}

func (s *countingStore) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, b := range s.bytes {
		n += b
	}
	return n
}

// BenchmarkSessionBytesPerTurn measures the bytes written to the store by
// one turn (a run of one model call) of a session, at turns 10, 100 and
// 500 of it, on each store: flat when a turn writes what it adds, growing
// with the session when it rewrites the conversation. Each turn's prompt
// and answer are about 200 bytes. Run it with -benchtime 1x: one
// iteration plays the whole session. At the end it checks that the
// session and its last run read back whole.
func BenchmarkSessionBytesPerTurn(b *testing.B) {
	stores := sessionStores()
	for _, name := range []string{"memory", "sqlite", "postgres", "redis"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cs := &countingStore{Store: stores[name](b), bytes: map[string]int64{}}
				m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
					return modeltest.Text(fmt.Sprintf("%-180s", "answer "+strconv.Itoa(len(req.Messages)))), nil
				})
				a, rt := benchW1(b, cs, m)
				ctx := b.Context()
				at := map[int]int64{}
				const turns = 500
				var last *agent.Output[string]
				for turn := 1; turn <= turns; turn++ {
					before := cs.total()
					out, err := a.Run(ctx, rt, fmt.Sprintf("%-180s", "question "+strconv.Itoa(turn)), &agent.RunOptions{SessionID: "long"})
					if err != nil {
						b.Fatal(err)
					}
					last = out
					switch turn {
					case 10, 100, 500:
						at[turn] = cs.total() - before
					}
				}
				b.ReportMetric(float64(at[10]), "B/turn@10")
				b.ReportMetric(float64(at[100]), "B/turn@100")
				b.ReportMetric(float64(at[500]), "B/turn@500")
				s, err := session.Load(ctx, rt.Store(), "long")
				if err != nil {
					b.Fatal(err)
				}
				if len(s.Messages) != 2*turns || len(s.Runs) != turns || len(last.Thread) != 2*turns {
					b.Fatalf("session: %d messages, %d runs; last run's thread: %d messages; want %d, %d, %d", len(s.Messages), len(s.Runs), len(last.Thread), 2*turns, turns, 2*turns)
				}
				if got := s.Messages[2*turns-2].Text(); got != last.Thread[2*turns-2].Text() || !strings.HasPrefix(got, "question 500") {
					b.Fatalf("the session's last prompt is %q, the run's %q", got, last.Thread[2*turns-2].Text())
				}
			}
		})
	}
}

// BenchmarkRunBytesPerStep measures the bytes written to the store per
// step (a model call that asks for a tool, the tool's result) of a single
// run of 200 steps, averaged over the 8 steps up to steps 10, 100 and 200
// (a step writes its run's record, and every fourth and eighth step a
// chunk of archived messages and tool calls too): flat when a step writes
// what it adds. Each step's call and result are about 200 bytes. Run it
// with -benchtime 1x.
func BenchmarkRunBytesPerStep(b *testing.B) {
	stores := sessionStores()
	for _, name := range []string{"memory", "sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cs := &countingStore{Store: stores[name](b), bytes: map[string]int64{}}
				const steps = 200
				var last int64
				at := map[int]int64{}
				m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
					step := (len(req.Messages) + 1) / 2 // the prompt, then a call and a result per step
					now := cs.total()
					switch step {
					case 3, 93, 193: // the 8 steps from this one
						last = now
					case 11, 101, 201:
						at[step-1] = (now - last) / 8
					}
					if step > steps {
						return modeltest.Text("done"), nil
					}
					return modeltest.ToolCalls(modeltest.Call(fmt.Sprint("call_", step), "add", fmt.Sprintf(`{"a":%d,"b":%d}`, step, 100000+step))), nil
				})
				a, rt := benchAgent(b, cs, m, steps+1)
				out, err := a.Run(b.Context(), rt, fmt.Sprintf("%-180s", "add many"), nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(out.Thread) != 2*steps+2 || len(out.ToolCalls) != steps {
					b.Fatalf("thread of %d messages, %d tool calls; want %d and %d", len(out.Thread), len(out.ToolCalls), 2*steps+2, steps)
				}
				b.ReportMetric(float64(at[10]), "B/step@10")
				b.ReportMetric(float64(at[100]), "B/step@100")
				b.ReportMetric(float64(at[200]), "B/step@200")
			}
		})
	}
}
