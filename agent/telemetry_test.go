package agent_test

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// A run is one trace: invoke_agent, and under it a chat span per model
// call and an execute_tool span per tool call, with the GenAI attributes;
// token usage and runs are counted.
func TestTelemetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	defer func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }()
	// Input tokens at $1 a million, output at $10: 70 in and 9 out cost $0.00016.
	rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{TracerProvider: tp, MeterProvider: mp, Prices: model.Prices{"test": {Input: 1, Output: 10}}})
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}))
	call := modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`))
	call.Usage = model.Usage{InputTokens: 30, OutputTokens: 7}
	answer := modeltest.Text("5")
	answer.Usage = model.Usage{InputTokens: 40, OutputTokens: 2}
	a := agent.Must(agent.NewText("calc", modeltest.NewTestModel(call, answer), "Add.", add))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, rt, "add 2 and 3", &agent.RunOptions{RunID: "traced"}); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	var invoke *tracetest.SpanStub
	names := map[string]int{}
	for i := range got {
		names[got[i].Name]++
		if got[i].Name == "invoke_agent calc" {
			invoke = &got[i]
		}
	}
	if invoke == nil || names["chat test"] != 2 || names["execute_tool add"] != 1 {
		t.Fatalf("spans %v", names)
	}
	for _, s := range got {
		if s.SpanContext.TraceID() != invoke.SpanContext.TraceID() {
			t.Errorf("span %s is in trace %s, the run's is %s", s.Name, s.SpanContext.TraceID(), invoke.SpanContext.TraceID())
		}
		if s.Name != invoke.Name && s.Parent.SpanID() != invoke.SpanContext.SpanID() {
			t.Errorf("span %s's parent is %s, not the run's span", s.Name, s.Parent.SpanID())
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		switch s.Name {
		case "invoke_agent calc":
			if attrs["gen_ai.operation.name"] != "invoke_agent" || attrs["gen_ai.agent.name"] != "calc" || attrs["calf.run.id"] != "traced" || attrs["gen_ai.usage.input_tokens"] != "70" {
				t.Errorf("invoke_agent attributes %v", attrs)
			}
		case "chat test":
			if attrs["gen_ai.operation.name"] != "chat" || attrs["gen_ai.request.model"] != "test" || (attrs["gen_ai.usage.input_tokens"] != "30" && attrs["gen_ai.usage.input_tokens"] != "40") {
				t.Errorf("chat attributes %v", attrs)
			}
		case "execute_tool add":
			if attrs["gen_ai.tool.name"] != "add" || attrs["gen_ai.tool.call.id"] != "c1" {
				t.Errorf("execute_tool attributes %v", attrs)
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	var tokens int64
	var cost float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
			if sum, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == "calf.model.cost" {
				for _, dp := range sum.DataPoints {
					cost += dp.Value
				}
			}
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "gen_ai.client.token.usage" {
				for _, dp := range h.DataPoints {
					tokens += dp.Sum
				}
			}
		}
	}
	for _, name := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "calf.agent.runs", "calf.message.lag", "calf.model.cost"} {
		if !found[name] {
			t.Errorf("no metric %s (have %v)", name, found)
		}
	}
	if tokens != 79 {
		t.Errorf("token usage recorded %d, want 79", tokens)
	}
	if math.Abs(cost-0.00016) > 1e-12 {
		t.Errorf("cost recorded $%g, want $0.00016", cost)
	}
}

// A subagent's run and the run a handoff starts have invoke_agent spans of
// their own, in the trace of the run that started them, with their model
// calls under them.
func TestTelemetrySubagentAndHandoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	defer func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }()
	rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{TracerProvider: tp})
	helper := agent.Must(agent.New("helper", modeltest.NewTestModel(modeltest.Text("looked it up")), &agent.Options{Description: "Looks things up."}))
	closer := agent.Must(agent.New("closer", modeltest.NewTestModel(modeltest.Text("all done")), &agent.Options{Description: "Closes."}))
	lead := agent.Must(agent.New("lead", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "helper", `{"input":"look it up"}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "transfer_to_closer", `{"context":"wrap up"}`)),
	), &agent.Options{Tools: []tool.Tool{tool.Must(agent.Handoff(closer, nil))}}))
	if err := lead.AddSubagent(helper, nil); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agent.Agent[string]{helper, closer, lead} {
		if err := a.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	out, err := lead.Run(ctx, rt, "go", &agent.RunOptions{RunID: "lead-1"})
	if err != nil || out.Output != "all done" {
		t.Fatalf("%+v %v", out, err)
	}
	// The span of a run's start ends once its input is published, on the
	// goroutine that published it, which the runs may outpace: wait for
	// the spans of the three runs and the five model calls.
	var all tracetest.SpanStubs
	testwait.For(t, 10*time.Second, "eight spans", func() bool {
		all = spans.GetSpans()
		return len(all) >= 8
	})
	byName := map[string]tracetest.SpanStub{}
	byID := map[string]tracetest.SpanStub{}
	var chats []tracetest.SpanStub
	for _, s := range all {
		byName[s.Name] = s
		byID[s.SpanContext.SpanID().String()] = s
		if s.Name == "chat test" {
			chats = append(chats, s)
		}
	}
	root, ok := byName["invoke_agent lead"]
	if !ok {
		t.Fatalf("no span of the lead's run: %v", byName)
	}
	for _, name := range []string{"invoke_agent helper", "invoke_agent closer"} {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no span %s: %v", name, byName)
			continue
		}
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s is in trace %s, the lead's run in %s", name, s.SpanContext.TraceID(), root.SpanContext.TraceID())
		}
	}
	// Each agent's model call sits under its own run's span.
	under := map[string]int{}
	for _, s := range chats {
		if p, ok := byID[s.Parent.SpanID().String()]; ok {
			under[p.Name]++
		}
	}
	if under["invoke_agent helper"] != 1 || under["invoke_agent closer"] != 1 || under["invoke_agent lead"] != 2 {
		t.Errorf("model calls under the runs' spans: %v", under)
	}
}

// A tool call that outlives its timeout counts in calf.tool.overdue until
// it returns.
func TestTelemetryCountsOverdueTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	defer func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }()
	rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{MeterProvider: mp})
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	stubborn := tool.Must(tool.New("stubborn", "Ignores its context.", func(context.Context, struct{}) (string, error) {
		<-release
		return "late", nil
	}))
	m := modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("c1", "stubborn", `{}`)), modeltest.Text("gave up"))
	a, err := agent.New("waiter", m, &agent.Options{Tools: []tool.Tool{stubborn}, ToolTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	overdue := func() (sum int64, attrs string) {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "calf.tool.overdue" {
					if s.IsMonotonic {
						t.Error("calf.tool.overdue is monotonic: it must go down when a call returns")
					}
					for _, dp := range s.DataPoints {
						sum += dp.Value
						attrs = dp.Attributes.Encoded(attribute.DefaultEncoder())
					}
				}
			}
		}
		return sum, attrs
	}
	if _, err := a.Run(ctx, rt, "go", &agent.RunOptions{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	// The run is over; its tool call is not.
	if n, attrs := overdue(); n != 1 || attrs != "gen_ai.agent.name=waiter,gen_ai.tool.name=stubborn" {
		t.Fatalf("calf.tool.overdue = %d {%s} while the tool hangs, want 1 {gen_ai.agent.name=waiter,gen_ai.tool.name=stubborn}", n, attrs)
	}
	close(release)
	testwait.For(t, 30*time.Second, "the tool's late return to be counted", func() bool { return rt.LateToolResults() == 1 })
	if n, _ := overdue(); n != 0 {
		t.Errorf("calf.tool.overdue = %d after the tool returned, want 0", n)
	}
}
