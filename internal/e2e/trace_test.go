package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/testwait"
)

// A run served by two worker processes on NATS with PostgreSQL (the first
// killed with SIGKILL in the middle of the run) is one trace: the caller's
// invoke_agent span, and under it the chat and execute_tool spans of both
// workers, whose trace context came in the messages.
func TestTraceAcrossWorkersNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	fastFailover(cfg)
	cfg.Trace = true
	cfg.EventLog = true
	calfBin := buildCalf(t)
	c := newCaller(t, cfg)
	spans := tracetest.NewInMemoryExporter()
	rt := agent.NewRuntime(c.rt.Client(), c.store, &agent.RuntimeOptions{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})

	crashing := *cfg
	crashing.Crash = "tool_recorded"
	first := h.start(&crashing)
	h.ready(first)
	id := "trace-" + calf.NewID()[:12]
	c.mu.Lock()
	c.runs = append(c.runs, id)
	c.mu.Unlock()
	res := make(chan runResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		out, err := c.agent.Run(ctx, rt, prompt, &agent.RunOptions{RunID: id})
		res <- runResult{out, err}
	}()
	h.waitEvent("crash", func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
	h.waitExit(first)
	second := h.start(cfg)
	h.ready(second)
	checkW1(t, id, await(t, id, res))
	// The workers record the event log apart from the run: wait until it
	// has the run's output before they stop.
	testwait.ForErr(t, waitTimeout, "the output in the event log of "+id, func() error {
		evs, err := eventlog.Read(t.Context(), c.store, id, 0, 0)
		if err == nil && (len(evs) == 0 || !strings.HasSuffix(evs[len(evs)-1].Message.Channel, ".output")) {
			err = fmt.Errorf("%d events, none the output last", len(evs))
		}
		return err
	})
	h.stopAll()

	var invoke *tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "invoke_agent "+cfg.Agent {
			invoke = &s
		}
	}
	if invoke == nil {
		t.Fatalf("no invoke_agent span in the caller: %v", spans.GetSpans())
	}
	trace, root := invoke.SpanContext.TraceID().String(), invoke.SpanContext.SpanID().String()
	names := map[string]int{}
	pids := map[int]bool{}
	for _, ev := range h.eventsOf("span", id) {
		name, _, _ := strings.Cut(ev.Content, " ")
		names[name]++
		pids[ev.PID] = true
		if ev.Trace != trace || ev.Parent != root {
			t.Errorf("span %s of worker %d: trace %s parent %s; the run's trace is %s, its span %s", ev.Content, ev.PID, ev.Trace, ev.Parent, trace, root)
		}
	}
	if names["chat"] < 2 || names["execute_tool"] < 1 {
		t.Errorf("the workers' spans: %v", names)
	}
	if !pids[first.pid] || !pids[second.pid] {
		t.Errorf("spans from workers %v; want both %d and %d", pids, first.pid, second.pid)
	}
	t.Logf("one trace %s: %v from %d processes", trace, names, len(pids))

	// calf trace prints the run's causal tree from the workers' event log,
	// each event with the worker that published it.
	out, err := runCalf(t, calfBin, "trace", "--store", cfg.StoreURL, id)
	if err != nil {
		t.Fatalf("calf trace: %v\n%s", err, out)
	}
	host, _, _ := strings.Cut(calf.ProcessName(), "/")
	for _, want := range []string{"run " + id, "input", "model call 1", "tool call add", "tool result add", "model call 2", "output complete",
		fmt.Sprintf("by %s/%d", host, first.pid), fmt.Sprintf("by %s/%d", host, second.pid)} {
		if !strings.Contains(out, want) {
			t.Errorf("calf trace does not show %q:\n%s", want, out)
		}
	}
	t.Logf("calf trace:\n%s", out)
}
