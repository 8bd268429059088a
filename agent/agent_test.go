package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// env is a runtime on the memory broker and a SQLite store in a temp dir.
type env struct {
	rt     *agent.Runtime
	client *calf.Client
	broker *memory.Broker
	store  store.Store

	mu     sync.Mutex
	events []*calf.Message // every agent event, as published
}

// notLocal hides that b is local (calf.IsLocal), as a broker whose
// deliveries may go to other processes would: the handlers then record a
// tool's result in its own record and read the run where they must.
func notLocal(b calf.Broker) calf.Broker { return struct{ calf.Broker }{b} }

type envOptions struct {
	wrap    func(calf.Broker) calf.Broker
	maxSize int
	// backoff is the broker's wait before a retry. Default: 1 ms.
	backoff time.Duration
}

func newEnv(t *testing.T, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	backoff := o.backoff
	if backoff == 0 {
		backoff = time.Millisecond
	}
	mb := memory.New(&memory.Options{MaxAttempts: 3, Backoff: func(int) time.Duration { return backoff }})
	var b calf.Broker = mb
	if o.wrap != nil {
		b = o.wrap(mb)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := calf.NewClient(b, &calf.Options{MaxMessageSize: o.maxSize})
	e := &env{rt: agent.NewRuntime(c, st, nil), client: c, broker: mb, store: st}
	// Record every agent event as it reaches the broker (before any
	// duplication a wrapper adds on delivery).
	if _, err := mb.Subscribe(t.Context(), "calf.>", func(_ context.Context, m *calf.Message) error {
		e.mu.Lock()
		e.events = append(e.events, m)
		e.mu.Unlock()
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = mb.Close()
		_ = st.Close()
	})
	return e
}

// eventIDs returns the distinct ids of the recorded events on channels
// matching pattern, and how many messages carried them.
func (e *env) eventIDs(pattern string) (ids []string, total int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range e.events {
		if !calf.MatchChannel(pattern, m.Channel) {
			continue
		}
		total++
		if !seen[m.ID] {
			seen[m.ID] = true
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids, total
}

// settle waits until the broker has nothing left to deliver.
func (e *env) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.broker.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

type addArgs struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

// addTool returns the W1 tool and a counter of its executions.
func addTool(t *testing.T) (tool.Tool, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	add, err := tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		n.Add(1)
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return add, &n
}

// w1Model calls add(2, 3) first and answers with the tool's result once it
// has one: workload W1. It counts its calls.
func w1Model(calls *atomic.Int64) modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		calls.Add(1)
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	}
}

func newW1(t *testing.T, e *env) (*agent.Agent[string], *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var modelCalls atomic.Int64
	add, toolCalls := addTool(t)
	a, err := agent.New("calculator", w1Model(&modelCalls), &agent.Options{
		Instructions: "You add numbers with the add tool.",
		Tools:        []tool.Tool{add},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return a, &modelCalls, toolCalls
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunWithTool(t *testing.T) {
	e := newEnv(t, nil)
	a, modelCalls, toolCalls := newW1(t, e)
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "The sum is 5" {
		t.Errorf("output = %q", out.Output)
	}
	if modelCalls.Load() != 2 || toolCalls.Load() != 1 || out.Steps != 2 {
		t.Errorf("model calls %d, tool calls %d, steps %d; want 2, 1, 2", modelCalls.Load(), toolCalls.Load(), out.Steps)
	}
	roles := []model.Role{}
	for _, m := range out.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]model.Role{"user", "assistant", "tool", "assistant"}, roles); diff != "" {
		t.Errorf("message roles (-want +got):\n%s", diff)
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "add" || out.ToolCalls[0].Status != agent.StatusSuccess || out.ToolCalls[0].Result.Text() != "5" {
		t.Errorf("tool calls = %+v", out.ToolCalls)
	}
	if out.Usage.Requests != 2 || out.Usage.TotalTokens == 0 {
		t.Errorf("usage = %+v", out.Usage)
	}
	if out.Duration <= 0 {
		t.Errorf("duration = %v", out.Duration)
	}
	st, err := e.rt.LoadState(t.Context(), out.RunID)
	if err != nil || st.Status != agent.RunComplete {
		t.Fatalf("stored run: %+v, %v", st, err)
	}
}

// eventsOfRun runs W1 with a fixed run id and returns the distinct event ids
// and the model and tool call counts.
func eventsOfRun(t *testing.T, o *envOptions) (ids []string, total int, modelCalls, toolCalls int64) {
	e := newEnv(t, o)
	a, mc, tc := newW1(t, e)
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "The sum is 5" {
		t.Fatalf("output = %q", out.Output)
	}
	e.settle(t)
	ids, total = e.eventIDs("calf.agent.>")
	return ids, total, mc.Load(), tc.Load()
}

// Delivering every message twice yields the same messages, one model call
// per step and one execution per tool call.
func TestDuplicateDeliveryIsIdempotent(t *testing.T) {
	want, _, _, _ := eventsOfRun(t, nil)
	for name, wrap := range map[string]func(calf.Broker) calf.Broker{
		"publishes":  func(b calf.Broker) calf.Broker { return brokertest.DuplicatePublishes(b, 2) },
		"deliveries": func(b calf.Broker) calf.Broker { return brokertest.DuplicateDeliveries(b, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			got, total, modelCalls, toolCalls := eventsOfRun(t, &envOptions{wrap: wrap})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event ids differ from a fault-free run (-want +got):\n%s", diff)
			}
			if modelCalls != 2 || toolCalls != 1 {
				t.Errorf("model calls %d, tool executions %d; want 2 and 1", modelCalls, toolCalls)
			}
			t.Logf("%d distinct events, %d messages", len(got), total)
		})
	}
}

// A redelivered inference whose response is recorded does not call the
// model again, and a redelivered tool call whose result is recorded does not
// run the tool again.
func TestRedeliveryAfterRecordingDoesNotRepeat(t *testing.T) {
	e := newEnv(t, nil)
	a, modelCalls, toolCalls := newW1(t, e)
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	// Publish again every inference and tool call the run had, as a broker
	// would after a lost acknowledgement.
	e.mu.Lock()
	var again []*calf.Message
	for _, m := range e.events {
		if strings.Contains(m.Channel, ".inference") || strings.Contains(m.Channel, ".tool_call.") || strings.HasSuffix(m.Channel, ".input") {
			again = append(again, m.Clone())
		}
	}
	e.mu.Unlock()
	if len(again) != 4 {
		t.Fatalf("expected input, two inferences and one tool call, got %d", len(again))
	}
	for _, m := range again {
		if err := e.broker.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	if modelCalls.Load() != 2 || toolCalls.Load() != 1 {
		t.Fatalf("after redelivery: model calls %d, tool executions %d; want 2 and 1", modelCalls.Load(), toolCalls.Load())
	}
	st, err := e.rt.LoadState(t.Context(), out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunComplete || len(st.Messages) != 4 {
		t.Fatalf("state changed by redelivery: %s with %d messages", st.Status, len(st.Messages))
	}
}

// gate is a tool that blocks until released, so tests can act while a run
// waits for it.
type gate struct {
	started chan string
	release chan struct{}
}

func newGateTool(t *testing.T, g *gate) tool.Tool {
	t.Helper()
	tl, err := tool.New("wait", "Wait for a signal.", func(ctx context.Context, in struct {
		Label string `json:"label"`
	}) (string, error) {
		g.started <- in.Label
		select {
		case <-g.release:
			return "released " + in.Label, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// A tool result for an unknown call or for a call already answered is
// ignored: no state change and no extra inference.
func TestToolResultForUnknownOrAnsweredCallIsIgnored(t *testing.T) {
	e := newEnv(t, nil)
	g := &gate{started: make(chan string, 4), release: make(chan struct{})}
	var modelCalls atomic.Int64
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		modelCalls.Add(1)
		if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
			return modeltest.Text("done"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_a", "wait", `{"label":"a"}`)), nil
	})
	a, err := agent.New("waiter", m, &agent.Options{Tools: []tool.Tool{newGateTool(t, g)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out *agent.Output[string]
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "r1"})
		done <- result{out, err}
	}()
	<-g.started
	bogus := agent.ToolResultEvent{Step: 1, ToolCallID: "call_nobody_made", ToolName: "wait", Status: agent.StatusSuccess, Result: tool.TextResult("forged")}
	publishResult := func(ev agent.ToolResultEvent, id string) {
		t.Helper()
		if _, err := e.client.Emit(t.Context(), agent.ToolResultChannel("waiter"), ev, calf.WithID(id),
			calf.WithMetadata(calf.Metadata{RunID: "r1", CorrelationID: "r1"})); err != nil {
			t.Fatal(err)
		}
	}
	// The forged result goes through the same key as the real one, so it is
	// handled first: a handler that counted results instead of matching
	// call ids would advance the run on it.
	publishResult(bogus, "forged-1")
	close(g.release)
	r := <-done
	if r.err != nil || r.out.Output != "done" {
		t.Fatalf("run: %v %v", r.out, r.err)
	}
	// An answer to the already answered call, with another message id.
	publishResult(agent.ToolResultEvent{Step: 1, ToolCallID: "call_a", ToolName: "wait", Status: agent.StatusSuccess, Result: tool.TextResult("again")}, "forged-2")
	e.settle(t)
	if modelCalls.Load() != 2 {
		t.Fatalf("model calls = %d, want 2", modelCalls.Load())
	}
	after, err := e.rt.LoadState(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.out.Messages, after.NewMessages()); diff != "" {
		t.Errorf("answered call changed the conversation:\n%s", diff)
	}
	var toolTexts []string
	for _, m := range after.Messages {
		if m.Role == model.RoleTool {
			toolTexts = append(toolTexts, m.Text())
		}
	}
	if diff := cmp.Diff([]string{"released a"}, toolTexts); diff != "" {
		t.Errorf("tool messages (-want +got):\n%s", diff)
	}
}

// Two tool calls of one step run in parallel: each waits for the other to
// start, which would time out if they ran one after the other.
func TestParallelToolCalls(t *testing.T) {
	e := newEnv(t, nil)
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	meet, err := tool.New("meet", "Meet the other call.", func(ctx context.Context, in struct {
		Who string `json:"who"`
	}) (string, error) {
		arrived.Done()
		select {
		case <-both:
			return "met " + in.Who, nil
		case <-time.After(10 * time.Second):
			return "", errors.New("the other call never started: tool calls ran serially")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "meet", `{"who":"x"}`), modeltest.Call("c2", "meet", `{"who":"y"}`)),
		modeltest.Text("both met"),
	)
	a, err := agent.New("meeter", m, &agent.Options{Tools: []tool.Tool{meet}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "meet", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range out.ToolCalls {
		if tc.Status != agent.StatusSuccess {
			t.Errorf("tool call %s: %s %s", tc.ID, tc.Status, tc.Result.Text())
		}
	}
}

// The last of N tool results triggers exactly one inference.
func TestLastResultTriggersOneInference(t *testing.T) {
	e := newEnv(t, nil)
	add, toolCalls := addTool(t)
	const n = 6
	var calls []model.ToolCall
	for i := range n {
		calls = append(calls, modeltest.Call(fmt.Sprintf("c%d", i), "add", fmt.Sprintf(`{"a":%d,"b":1}`, i)))
	}
	m := modeltest.NewTestModel(modeltest.ToolCalls(calls...), modeltest.Text("all added"))
	a, err := agent.New("fanout", m, &agent.Options{Tools: []tool.Tool{add}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "add them", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	ids, total := e.eventIDs(agent.InferenceChannel("fanout"))
	if len(ids) != 2 || total != 2 {
		t.Errorf("inference events: %d distinct, %d published; want 2 and 2", len(ids), total)
	}
	if m.Calls() != 2 || toolCalls.Load() != n || len(out.ToolCalls) != n {
		t.Errorf("model calls %d, tool executions %d, recorded %d", m.Calls(), toolCalls.Load(), len(out.ToolCalls))
	}
	// The tool messages follow the order of the calls, whatever order the
	// results arrived in.
	for i, msg := range out.Messages[2 : 2+n] {
		if msg.ToolCallID != fmt.Sprintf("c%d", i) {
			t.Errorf("tool message %d answers %s", i, msg.ToolCallID)
		}
	}
}

type answer struct {
	City        string   `json:"city" jsonschema:"the city"`
	Population  int      `json:"population"`
	Landmarks   []string `json:"landmarks"`
	Approximate bool     `json:"approximate,omitempty"`
}

func TestStructuredOutput(t *testing.T) {
	e := newEnv(t, nil)
	want := answer{City: "Lyon", Population: 520000, Landmarks: []string{"Fourvière"}}
	m := modeltest.NewTestModel(modeltest.JSON(want))
	a, err := agent.NewTyped[answer]("geo", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "Lyon?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	req := m.Requests()[0]
	if req.Output == nil || !strings.Contains(string(req.Output.Schema), `"population"`) {
		t.Errorf("the request carries no output schema: %+v", req.Output)
	}
}

func TestStructuredOutputRepair(t *testing.T) {
	e := newEnv(t, nil)
	want := answer{City: "Oslo", Population: 700000, Landmarks: []string{}}
	m := modeltest.NewTestModel(
		modeltest.Text(`{"city": "Oslo", "population": "many"}`), // wrong type, missing field
		modeltest.Text("```json\n"+`{"city":"Oslo","population":700000,"landmarks":[]}`+"\n```"),
	)
	a, err := agent.NewTyped[answer]("geo", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "Oslo?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	second := m.Requests()[1]
	last := second.Messages[len(second.Messages)-1]
	if last.Role != model.RoleUser || !strings.Contains(last.Text(), "not valid output") {
		t.Errorf("the repair request does not explain the error: %q", last.Text())
	}
}

func TestStructuredOutputRepairBudget(t *testing.T) {
	e := newEnv(t, nil)
	m := modeltest.NewTestModel(modeltest.Text("no"), modeltest.Text("still no"), modeltest.Text(`{"city": 3}`))
	a, err := agent.NewTyped[answer]("geo", m, &agent.Options{MaxRepairs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(runCtx(t), e.rt, "?", nil)
	var re *agent.RunError
	if !errors.Is(err, agent.ErrRunFailed) || !errors.As(err, &re) || !strings.Contains(re.Reason, "invalid output after 2 repair attempts") {
		t.Fatalf("err = %v", err)
	}
	if m.Calls() != 3 {
		t.Errorf("model calls = %d, want 3", m.Calls())
	}
}

// Submitting a run id again does not run it again: the caller gets the
// recorded output.
func TestResubmittedRunReturnsItsOutput(t *testing.T) {
	e := newEnv(t, nil)
	a, modelCalls, toolCalls := newW1(t, e)
	opts := &agent.RunOptions{RunID: "once"}
	first, err := a.Run(runCtx(t), e.rt, "add 2 and 3", opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Run(runCtx(t), e.rt, "add 2 and 3", opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Output != first.Output || modelCalls.Load() != 2 || toolCalls.Load() != 1 {
		t.Fatalf("second submission: %q after %d model calls and %d tool calls", again.Output, modelCalls.Load(), toolCalls.Load())
	}
}

// Runtime.Cancel ends a run from outside: its caller gets the cancelled
// output with the reason, and the run takes no step after the model call
// in progress. Cancelling it again, or an ended run, changes nothing.
func TestRuntimeCancel(t *testing.T) {
	e := newEnv(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var calls atomic.Int64
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return modeltest.Text("too late"), nil
	})
	a := agent.Must(agent.New("slow", m, nil))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(t.Context(), e.rt, "hi", &agent.RunOptions{RunID: "r1"})
		done <- err
	}()
	<-started
	// Another runtime on the same broker and store: an operator's.
	op := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	st, err := agentInfo(op.Cancel(t.Context(), agent.RunRef{Name: "slow", RunID: "r1"}, "stopped by the operator"))
	if err != nil || st.RunStatus() != agent.RunCancelled {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	err = <-done
	var re *agent.RunError
	if !errors.Is(err, agent.ErrRunCancelled) || !errors.As(err, &re) || re.Reason != "stopped by the operator" {
		t.Errorf("Run = %v, want ErrRunCancelled with the operator's reason", err)
	}
	close(release)
	e.settle(t)
	if st, err := e.rt.LoadState(t.Context(), "r1"); err != nil || st.Status != agent.RunCancelled || st.Step != 1 {
		t.Errorf("run after the model answered: %+v, %v; want cancelled at step 1", st, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("model calls = %d, want 1", n)
	}
	if st, err := agentInfo(op.Cancel(t.Context(), agent.RunRef{Name: "slow", RunID: "r1"}, "again")); err != nil || st.Error != "stopped by the operator" {
		t.Errorf("second Cancel = %+v, %v; want the first cancellation kept", st, err)
	}
}
