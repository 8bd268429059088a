package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// The benchmarks run workload W1 (see docs/benchmarks.md): the agent
// "calculator" with the tool add(a, b int) int and the task "add 2 and 3".
// The scripted model calls add, then answers with the tool's result, so a
// run is two model calls and one tool call, with no HTTP: what is measured
// is the framework's own cost per run.

type benchOperands struct {
	A int `json:"a"`
	B int `json:"b"`
}

const benchWant = "The sum is 5"

// benchW1Model calls add, then, once the last message is the tool's result,
// answers with it.
func benchW1Model() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	}
}

// benchW1 serves W1's agent with model m on a fresh in-process broker and
// the store st, and returns it with its runtime.
func benchW1(b *testing.B, st store.Store, m model.Model) (*agent.Agent[string], *agent.Runtime) {
	b.Helper()
	return benchAgent(b, st, m, 0)
}

// benchAgent is benchW1 with maxTurns as the agent's MaxTurns (0: the
// default).
func benchAgent(b *testing.B, st store.Store, m model.Model, maxTurns int) (*agent.Agent[string], *agent.Runtime) {
	b.Helper()
	br := memory.New(nil)
	client := calf.NewClient(br, nil)
	b.Cleanup(func() {
		_ = client.Close()
		_ = br.Close()
	})
	rt := agent.NewRuntime(client, st, nil)
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in benchOperands) (int, error) {
		return in.A + in.B, nil
	}))
	a := agent.Must(agent.New("calculator", m, &agent.Options{
		Instructions: "Use the add tool.",
		Tools:        []tool.Tool{add},
		MaxTurns:     maxTurns,
	}))
	if err := a.Serve(b.Context(), rt, nil); err != nil {
		b.Fatal(err)
	}
	return a, rt
}

func benchSQLite(b *testing.B) store.Store {
	b.Helper()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

func benchRun(b *testing.B, st store.Store) {
	a, rt := benchW1(b, st, benchW1Model())
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		out, err := a.Run(ctx, rt, "add 2 and 3", nil)
		if err != nil {
			b.Fatal(err)
		}
		if out.Output != benchWant {
			b.Fatalf("output %q, want %q", out.Output, benchWant)
		}
	}
}

// BenchmarkRunW1 measures one W1 run, start to output, on the in-process
// broker and the memory store.
func BenchmarkRunW1(b *testing.B) { benchRun(b, storemem.New()) }

// BenchmarkRunW1SQLite measures one W1 run on the in-process broker and
// the SQLite store.
func BenchmarkRunW1SQLite(b *testing.B) { benchRun(b, benchSQLite(b)) }

// BenchmarkSessionTurnSQLite measures one turn of a session, a W1 run
// with the session's history, on the in-process broker and the SQLite
// store; the sessions are 50 turns long, so a turn's history averages 25
// earlier turns (100 messages).
func BenchmarkSessionTurnSQLite(b *testing.B) {
	a, rt := benchW1(b, benchSQLite(b), benchW1Model())
	ctx := b.Context()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		out, err := a.Run(ctx, rt, "add 2 and 3", &agent.RunOptions{SessionID: fmt.Sprint("s", n/50)})
		if err != nil {
			b.Fatal(err)
		}
		if out.Output != benchWant {
			b.Fatalf("output %q, want %q", out.Output, benchWant)
		}
		n++
	}
}

// BenchmarkRunW1Parallel measures W1 runs made from GOMAXPROCS goroutines
// at once (scale with -cpu), on the in-process broker and the memory store.
func BenchmarkRunW1Parallel(b *testing.B) { benchParallel(b, storemem.New(), 1) }

// BenchmarkRunW1SQLite64 measures W1 runs made from 64 goroutines at once
// on the in-process broker and the SQLite store: the load under which
// Puts are committed together.
func BenchmarkRunW1SQLite64(b *testing.B) {
	benchParallel(b, benchSQLite(b), max(1, 64/runtime.GOMAXPROCS(0)))
}

// benchParallel runs W1 from parallelism × GOMAXPROCS goroutines on st.
func benchParallel(b *testing.B, st store.Store, parallelism int) {
	a, rt := benchW1(b, st, benchW1Model())
	ctx := b.Context()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := a.Run(ctx, rt, "add 2 and 3", nil)
			if err != nil {
				b.Error(err)
				return
			}
			if out.Output != benchWant {
				b.Errorf("output %q, want %q", out.Output, benchWant)
				return
			}
		}
	})
}

// BenchmarkInferenceStep measures W1's last step alone: from the inference
// event of step 2 of a run whose tool result is recorded, to its output
// event. That is the inference handler (load the state, build the request,
// call the model, record the answer with a compare-and-swap, emit the
// output) plus two broker deliveries; the input handler, the tool call and
// Run's reading of the result are not included.
func BenchmarkInferenceStep(b *testing.B) {
	st := storemem.New()
	a, rt := benchW1(b, st, benchW1Model())
	ctx := b.Context()
	name := a.Name()
	state := func(id string) []byte {
		data, err := json.Marshal(&agent.RunState{
			RunID: id, Agent: name, Status: agent.RunRunning, Phase: agent.PhaseInference, Step: 2,
			Transcript: agent.Transcript{Messages: []model.Message{
				model.UserMessage("add 2 and 3"),
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
				{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "add", Parts: []model.Part{model.TextPart("5")}},
			}},
			ToolCalls: []agent.ToolCallRecord{{Step: 1, ID: "call_1", Name: "add", Arguments: `{"a":2,"b":3}`,
				Status: agent.StatusSuccess, Result: tool.TextResult("5")}},
			Usage:     model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
			StartedAt: time.Now(),
		})
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	// The runs are stored before the clock starts; the loop only sends
	// their inference events.
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "bench-step-" + strconv.Itoa(i)
		if _, err := st.Put(ctx, store.KindRun, ids[i], state(ids[i]), 0); err != nil {
			b.Fatal(err)
		}
	}
	client := rt.Client()
	b.ReportAllocs()
	b.ResetTimer()
	for _, id := range ids {
		if err := benchStep(ctx, client, name, id); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStep sends the inference event of step 2 of run id and waits for
// the run's output.
func benchStep(ctx context.Context, client *calf.Client, name, id string) error {
	f, err := client.Follow(ctx, agent.OutputChannel(name), id)
	if err != nil {
		return err
	}
	defer f.Close()
	msg, err := client.NewMessage(ctx, agent.InferenceChannel(name), agent.InferenceEvent{Step: 2},
		calf.WithID(id+".inference.2"), calf.WithKey(id), calf.WithMetadata(calf.Metadata{CorrelationID: id, RunID: id}))
	if err != nil {
		return err
	}
	if err := client.Publish(ctx, msg); err != nil {
		return err
	}
	m, err := f.Next(ctx)
	if err != nil {
		return err
	}
	var ev agent.OutputEvent
	if err := m.Decode(&ev); err != nil {
		return err
	}
	if want := strconv.Quote(benchWant); ev.Status != agent.OutputComplete || string(ev.Content) != want {
		return fmt.Errorf("output %s %s (%s), want complete %s", ev.Status, ev.Content, ev.Error, want)
	}
	return nil
}
