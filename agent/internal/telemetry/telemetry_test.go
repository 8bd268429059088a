package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/model"
)

// A nil *Telemetry records nothing and returns no spans.
func TestNil(t *testing.T) {
	var tel *Telemetry
	if New(nil, nil) != nil {
		t.Fatal("New(nil, nil) is not nil")
	}
	ctx := context.Background()
	msg := &calf.Message{}
	if _, span := tel.Invoke(ctx, "a", msg); span != nil || msg.Metadata.Traceparent != "" {
		t.Fatal("a nil Telemetry started a span")
	}
	if _, span := tel.Chat(ctx, msg, "a", "m", 1); span != nil {
		t.Fatal("a nil Telemetry started a chat span")
	}
	if _, span := tel.Tool(ctx, msg, "a", "t", "c1"); span != nil {
		t.Fatal("a nil Telemetry started a tool span")
	}
	if tel.MeasuresLag() {
		t.Fatal("a nil Telemetry measures lag")
	}
	tel.EndChat(ctx, nil, "m", &model.Response{}, nil, time.Second, nil)
	tel.EndTool(ctx, nil, "t", "error", "boom", time.Second)
	tel.Ended(ctx, "a", "complete")
	tel.OverdueTools("a", "t", 1)
	tel.Handled(ctx, msg, time.Now())
	EndInvoke(nil, &Ended{Failed: true}, nil)
}

// How a run and a tool call ended shows in their spans' statuses and
// attributes, and in the duration metric's error.type.
func TestEnds(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tel := New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)), sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	msg := &calf.Message{Metadata: calf.Metadata{RunID: "r1", SessionID: "s1"}}
	ictx, span := tel.Invoke(ctx, "calc", msg)
	if msg.Metadata.Traceparent == "" {
		t.Fatal("Invoke left the input message without a traceparent")
	}
	_, tspan := tel.Tool(StartedBy(ictx), msg, "calc", "add", "c1")
	tel.EndTool(ctx, tspan, "add", "error", "no such number", time.Millisecond)
	EndInvoke(span, &Ended{Usage: model.Usage{InputTokens: 3, OutputTokens: 4}, Failed: true, Error: "gave up"}, nil)
	_, span = tel.Invoke(ctx, "calc", &calf.Message{})
	EndInvoke(span, nil, errors.New("unreachable"))

	got := spans.GetSpans()
	if len(got) != 3 {
		t.Fatalf("%d spans, want 3", len(got))
	}
	tool, run, failed := got[0], got[1], got[2]
	if tool.Name != "execute_tool add" || tool.Status.Code != codes.Error || tool.Status.Description != "no such number" || tool.Parent.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("tool span %s, status %+v, parent %s", tool.Name, tool.Status, tool.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range run.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if run.Status.Code != codes.Error || run.Status.Description != "gave up" || attrs["gen_ai.usage.input_tokens"] != "3" || attrs["gen_ai.usage.output_tokens"] != "4" || attrs["gen_ai.conversation.id"] != "s1" {
		t.Errorf("run span status %+v, attributes %v", run.Status, attrs)
	}
	if failed.Status.Code != codes.Error || failed.Status.Description != "unreachable" {
		t.Errorf("span of a run not started: status %+v", failed.Status)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var errorType string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "gen_ai.client.operation.duration" {
				for _, dp := range h.DataPoints {
					if v, ok := dp.Attributes.Value("error.type"); ok {
						errorType = v.AsString()
					}
				}
			}
		}
	}
	if errorType != "tool_error" {
		t.Errorf("error.type of the failed tool call %q, want tool_error", errorType)
	}
}
