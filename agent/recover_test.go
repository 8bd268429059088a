package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// dyingBroker stands for a process that dies: from the first message that
// matches die on, everything it publishes is lost, as the in-memory
// broker's messages are when the process goes away.
type dyingBroker struct {
	calf.Broker
	die  func(*calf.Message) bool
	once sync.Once
	dead chan struct{}
}

func (b *dyingBroker) Publish(ctx context.Context, msg *calf.Message) error {
	select {
	case <-b.dead:
		return nil
	default:
	}
	if b.die(msg) {
		b.once.Do(func() { close(b.dead) })
		return nil
	}
	return b.Broker.Publish(ctx, msg)
}

// life is one life of a process: a runtime on a fresh memory broker and
// the SQLite file at path, serving W1's agent.
type life struct {
	rt     *agent.Runtime
	client *calf.Client
	broker *memory.Broker
	agent  *agent.Agent[string]
	close  func()
}

func newLife(t *testing.T, path string, wrap func(calf.Broker) calf.Broker, m model.Model, add tool.Tool) *life {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mb := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	var b calf.Broker = mb
	if wrap != nil {
		b = wrap(mb)
	}
	c := calf.NewClient(b, nil)
	l := &life{rt: agent.NewRuntime(c, st, nil), client: c, broker: mb}
	l.agent, err = agent.New("calculator", m, &agent.Options{
		Instructions: "You add numbers with the add tool.",
		Tools:        []tool.Tool{add},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.agent.Serve(t.Context(), l.rt, nil); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	l.close = func() {
		once.Do(func() {
			_ = c.Close()
			_ = mb.Close()
			_ = st.Close()
		})
	}
	t.Cleanup(l.close)
	return l
}

// submit publishes the input of W1 as run id.
func submit(t *testing.T, c *calf.Client, id string) {
	t.Helper()
	if _, err := c.Emit(t.Context(), agent.InputChannel("calculator"), agent.InputEvent{Content: "add 2 and 3"},
		calf.WithID(id+".input"), calf.WithKey(id), calf.WithMetadata(calf.Metadata{CorrelationID: id, RunID: id})); err != nil {
		t.Fatal(err)
	}
}

// stepOf returns the step of an inference event.
func stepOf(m *calf.Message) int {
	var ev agent.InferenceEvent
	_ = json.Unmarshal(m.Data, &ev)
	return ev.Step
}

// A process on the memory broker dies at each step boundary of W1; a new
// process on the same SQLite file recovers the run, which completes
// without calling the model or the tool again for what was recorded.
func TestRecoverAfterRestart(t *testing.T) {
	for _, tt := range []struct {
		name string
		die  func(*calf.Message) bool
		opts *agent.RecoverOptions
	}{
		{"input saved", func(m *calf.Message) bool {
			return strings.HasSuffix(m.Channel, ".inference") && stepOf(m) == 1
		}, nil},
		{"model response recorded", func(m *calf.Message) bool { return strings.Contains(m.Channel, ".tool_call.") }, nil},
		{"tool result recorded", func(m *calf.Message) bool { return strings.HasSuffix(m.Channel, ".tool_result") }, nil},
		{"tool result applied", func(m *calf.Message) bool {
			return strings.HasSuffix(m.Channel, ".inference") && stepOf(m) == 2
		}, nil},
		{"run ended", func(m *calf.Message) bool { return strings.HasSuffix(m.Channel, ".output") },
			&agent.RecoverOptions{EndedAfter: time.Now().Add(-time.Hour)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "calf.db")
			var modelCalls atomic.Int64
			add, toolCalls := addTool(t)
			dying := &dyingBroker{die: tt.die, dead: make(chan struct{})}
			first := newLife(t, path, func(b calf.Broker) calf.Broker { dying.Broker = b; return dying }, w1Model(&modelCalls), add)
			submit(t, first.client, "run-1")
			select {
			case <-dying.dead:
			case <-runCtx(t).Done():
				t.Fatal("the first process never reached the boundary")
			}
			first.close()

			second := newLife(t, path, nil, w1Model(&modelCalls), add)
			f, err := second.client.Follow(t.Context(), agent.OutputChannel("calculator"), "run-1")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n, err := second.agent.Recover(t.Context(), second.rt, tt.opts)
			if err != nil || n != 1 {
				t.Fatalf("Recover = %d, %v; want 1 run", n, err)
			}
			m, err := f.Next(runCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			var out agent.OutputEvent
			if err := m.Decode(&out); err != nil {
				t.Fatal(err)
			}
			if out.Status != agent.OutputComplete || string(out.Content) != `"The sum is 5"` {
				t.Errorf("output = %s %s (%s)", out.Status, out.Content, out.Error)
			}
			if modelCalls.Load() != 2 || toolCalls.Load() != 1 {
				t.Errorf("model calls %d, tool executions %d; want 2 and 1", modelCalls.Load(), toolCalls.Load())
			}
		})
	}
}

// Recover leaves ended runs, runs of other agents and recently written
// runs alone.
func TestRecoverSkips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var modelCalls atomic.Int64
	add, toolCalls := addTool(t)
	l := newLife(t, path, nil, w1Model(&modelCalls), add)
	if _, err := l.agent.Run(runCtx(t), l.rt, "add 2 and 3", nil); err != nil {
		t.Fatal(err)
	}
	other, err := agent.New("other", w1Model(&modelCalls), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A running run of "other" that nobody serves.
	if _, err := l.rt.Store().Put(t.Context(), "run", "other-1", []byte(`{"run_id":"other-1","agent":"other","status":"running","phase":"inference","step":1,"messages":[]}`), 0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		a    *agent.Agent[string]
		opts *agent.RecoverOptions
		want int
	}{
		{"ended", l.agent, nil, 0},
		{"other agent", other, nil, 1},
		{"written recently", other, &agent.RecoverOptions{WrittenBefore: time.Now().Add(-time.Hour)}, 0},
	} {
		n, err := tt.a.Recover(t.Context(), l.rt, tt.opts)
		if err != nil || n != tt.want {
			t.Errorf("%s: Recover = %d, %v; want %d", tt.name, n, err, tt.want)
		}
	}
	if modelCalls.Load() != 2 || toolCalls.Load() != 1 {
		t.Errorf("model calls %d, tool executions %d; want 2 and 1", modelCalls.Load(), toolCalls.Load())
	}
}

// Recovering a run that a live process is working on emits duplicates
// that change nothing: the tool in progress is not executed again.
func TestRecoverLiveRunIsHarmless(t *testing.T) {
	var started atomic.Int64
	release := make(chan struct{})
	inTool := make(chan struct{}, 1)
	slow, err := tool.New("add", "Add two integers.", func(ctx context.Context, in addArgs) (int, error) {
		started.Add(1)
		inTool <- struct{}{}
		select {
		case <-release:
			return in.A + in.B, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var modelCalls atomic.Int64
	l := newLife(t, filepath.Join(t.TempDir(), "calf.db"), nil, w1Model(&modelCalls), slow)
	type result struct {
		out *agent.Output[string]
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := l.agent.Run(runCtx(t), l.rt, "add 2 and 3", nil)
		done <- result{out, err}
	}()
	<-inTool
	n, err := l.agent.Recover(t.Context(), l.rt, nil)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 run", n, err)
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.out.Output != "The sum is 5" {
		t.Errorf("output = %q", r.out.Output)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.broker.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if modelCalls.Load() != 2 || started.Load() != 1 {
		t.Errorf("model calls %d, tool executions %d; want 2 and 1", modelCalls.Load(), started.Load())
	}
}

// Example of a process on the in-memory broker that continues, when it
// starts, the runs its previous life left unfinished in the SQLite store.
func ExampleAgent_Recover() {
	dir, err := os.MkdirTemp("", "calf-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "calf.db"), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, st, nil)
	a, err := agent.New("assistant", modeltest.NewTestModel(modeltest.Text("hello")), nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := a.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	n, err := a.Recover(ctx, rt, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("runs continued:", n)
	// Output: runs continued: 0
}
