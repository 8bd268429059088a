package agent

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/model"
)

// instrumentation names the tracer and the meter of the runtime.
const instrumentation = "github.com/calf-go/calf/agent"

// telemetry is a runtime's OpenTelemetry instruments, following the
// semantic conventions of generative AI: an invoke_agent span for a run,
// as its caller sees it, and a chat span for each model call and an
// execute_tool span for each tool call, children of the run's span
// whichever process carries them out (the trace context travels in each
// message's traceparent); token usage and operation durations; runs
// started and ended; the time messages wait on the broker. A nil
// *telemetry records nothing.
type telemetry struct {
	tracer   trace.Tracer
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	runs     metric.Int64Counter
	lag      metric.Float64Histogram
	cost     metric.Float64Counter
	overdue  metric.Int64UpDownCounter
}

var traceContext = propagation.TraceContext{}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) *telemetry {
	if tp == nil && mp == nil {
		return nil
	}
	t := &telemetry{}
	if tp != nil {
		t.tracer = tp.Tracer(instrumentation)
	}
	if mp != nil {
		m := mp.Meter(instrumentation)
		// Errors only report invalid names or units, which these are not.
		t.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
			metric.WithDescription("Tokens used by the model calls of agent runs, by type (input, output)."))
		t.duration, _ = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
			metric.WithDescription("Duration of model calls (chat) and tool calls (execute_tool)."))
		t.runs, _ = m.Int64Counter("calf.agent.runs", metric.WithUnit("{run}"),
			metric.WithDescription("Agent runs started, and ended by status (complete, error, cancelled, handoff)."))
		t.lag, _ = m.Float64Histogram("calf.message.lag", metric.WithUnit("s"),
			metric.WithDescription("Time from a message's publication to the start of its handling."))
		t.cost, _ = m.Float64Counter("calf.model.cost", metric.WithUnit("USD"),
			metric.WithDescription("What the model calls of agent runs cost, by the runtime's prices (calls of unpriced models count nothing)."))
		t.overdue, _ = m.Int64UpDownCounter("calf.tool.overdue", metric.WithUnit("{call}"),
			metric.WithDescription("Tool calls still running after their timeout: the run went on without them, and each holds its goroutines until the tool returns."))
	}
	return t
}

// parentOf returns ctx with the trace context of msg, when it has one.
func parentOf(ctx context.Context, msg *calf.Message) context.Context {
	if msg == nil || msg.Metadata.Traceparent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": msg.Metadata.Traceparent})
}

// traceparent returns the W3C traceparent of the span of ctx, or "".
func traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// startedBy returns the parent of the span of a run that a handler starts
// (a subagent's, the next run of a handoff): the span in ctx, or else the
// trace context of the message ctx handles.
func startedBy(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	in, _ := calf.MessageFromContext(ctx)
	return parentOf(ctx, in)
}

// invoke starts a run's invoke_agent span, as a child of ctx's span, and
// puts its trace context in the run's input message. The caller ends it.
func (t *telemetry) invoke(ctx context.Context, agentName string, msg *calf.Message) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	if t.runs != nil {
		t.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("gen_ai.agent.name", agentName), attribute.String("calf.run.status", "started")))
	}
	if t.tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", agentName),
		attribute.String("calf.run.id", msg.Metadata.RunID),
	}
	if s := msg.Metadata.SessionID; s != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", s))
	}
	ctx, span := t.tracer.Start(ctx, "invoke_agent "+agentName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	msg.Metadata.Traceparent = traceparent(ctx)
	return ctx, span
}

// endInvoke ends a run's span with how the run ended.
func endInvoke(span trace.Span, out *OutputEvent, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case out != nil:
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", out.Usage.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", out.Usage.OutputTokens))
		if out.Status == OutputFailed {
			span.SetStatus(codes.Error, out.Error)
		}
	}
	span.End()
}

// overdueTools adds n to the tool calls of agentName's toolName still
// running after their timeout.
func (t *telemetry) overdueTools(agentName, toolName string, n int64) {
	if t == nil || t.overdue == nil {
		return
	}
	// The handler's context may be over: the count is not about it.
	t.overdue.Add(context.Background(), n, metric.WithAttributes(attribute.String("gen_ai.agent.name", agentName), attribute.String("gen_ai.tool.name", toolName)))
}

// ended counts a run's end.
func (t *telemetry) ended(ctx context.Context, agentName, status string) {
	if t == nil || t.runs == nil {
		return
	}
	t.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("gen_ai.agent.name", agentName), attribute.String("calf.run.status", status)))
}

// handled records how long msg waited on the broker.
func (t *telemetry) handled(ctx context.Context, msg *calf.Message, now time.Time) {
	if t == nil || t.lag == nil || msg == nil || msg.Metadata.Time.IsZero() {
		return
	}
	t.lag.Record(ctx, now.Sub(msg.Metadata.Time).Seconds(), metric.WithAttributes(attribute.String("messaging.destination.name", msg.Channel)))
}

// chat starts the span of a model call of a run, as a child of the run's
// span (msg's trace context).
func (t *telemetry) chat(ctx context.Context, msg *calf.Message, agentName, modelName string, step int) (context.Context, trace.Span) {
	if t == nil || t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(parentOf(ctx, msg), "chat "+modelName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", modelName),
		attribute.String("gen_ai.agent.name", agentName),
		attribute.String("calf.run.id", msg.Metadata.RunID),
		attribute.Int("calf.step", step),
	))
}

// endChat ends a model call's span and records its usage and duration.
func (t *telemetry) endChat(ctx context.Context, span trace.Span, modelName string, resp *model.Response, err error, took time.Duration, prices model.Prices) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", modelName)}
	if err != nil {
		attrs = append(attrs, attribute.String("error.type", "model_call_failed"))
	}
	if t.duration != nil {
		t.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attrs...))
	}
	if resp != nil && t.tokens != nil {
		t.tokens.Record(ctx, resp.Usage.InputTokens, metric.WithAttributes(append(attrs, attribute.String("gen_ai.token.type", "input"))...))
		t.tokens.Record(ctx, resp.Usage.OutputTokens, metric.WithAttributes(append(attrs, attribute.String("gen_ai.token.type", "output"))...))
	}
	if resp != nil && t.cost != nil {
		if c := prices.CostOf(cmp.Or(resp.Model, modelName), resp.Usage); c.USD > 0 {
			t.cost.Add(ctx, c.USD, metric.WithAttributes(attrs...))
		}
	}
	if span == nil {
		return
	}
	if resp != nil {
		span.SetAttributes(
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.FinishReason)}),
		)
		if resp.Model != "" {
			span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model))
		}
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tool starts the span of a tool call, as a child of the run's span.
func (t *telemetry) tool(ctx context.Context, msg *calf.Message, agentName string, ev ToolCallEvent) (context.Context, trace.Span) {
	if t == nil || t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(parentOf(ctx, msg), "execute_tool "+ev.ToolName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", ev.ToolName),
		attribute.String("gen_ai.tool.call.id", ev.ToolCallID),
		attribute.String("gen_ai.agent.name", agentName),
		attribute.String("calf.run.id", msg.Metadata.RunID),
	))
}

// endTool ends a tool call's span and records its duration.
func (t *telemetry) endTool(ctx context.Context, span trace.Span, name string, res ToolResultEvent, took time.Duration) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", name)}
	if res.Status != StatusSuccess {
		attrs = append(attrs, attribute.String("error.type", "tool_"+res.Status))
	}
	if t.duration != nil {
		t.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attrs...))
	}
	if span == nil {
		return
	}
	if res.Status != StatusSuccess {
		msg := res.Status
		if res.Result != nil {
			msg = res.Result.Text()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
