package telemetry

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

// Instrumentation names the tracer and the meter of the runtime.
const Instrumentation = "github.com/calf-go/calf/agent"

// Telemetry is a runtime's instruments. A nil *Telemetry records nothing,
// and each of its methods may be called on it.
type Telemetry struct {
	tracer   trace.Tracer
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	runs     metric.Int64Counter
	lag      metric.Float64Histogram
	cost     metric.Float64Counter
	overdue  metric.Int64UpDownCounter
}

var traceContext = propagation.TraceContext{}

// New returns the instruments of tp and mp, either of which may be nil
// (no spans, no metrics), or nil when both are.
func New(tp trace.TracerProvider, mp metric.MeterProvider) *Telemetry {
	if tp == nil && mp == nil {
		return nil
	}
	t := &Telemetry{}
	if tp != nil {
		t.tracer = tp.Tracer(Instrumentation)
	}
	if mp != nil {
		m := mp.Meter(Instrumentation)
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

// ParentOf returns ctx with the trace context of msg, when it has one.
func ParentOf(ctx context.Context, msg *calf.Message) context.Context {
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

// StartedBy returns the parent of the span of a run that a handler starts
// (a subagent's, the next run of a handoff): the span in ctx, or else the
// trace context of the message ctx handles.
func StartedBy(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	in, _ := calf.MessageFromContext(ctx)
	return ParentOf(ctx, in)
}

// Invoke counts the start of a run of agentName and starts its
// invoke_agent span, as a child of ctx's span, putting the span's trace
// context in msg, the run's input message. The span is nil when t records
// no spans; the caller ends it with EndInvoke.
func (t *Telemetry) Invoke(ctx context.Context, agentName string, msg *calf.Message) (context.Context, trace.Span) {
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

// Ended is how a run ended, as its caller saw it.
type Ended struct {
	// Usage is what the run's model calls used.
	Usage model.Usage
	// Failed reports that the run failed, for the reason Error gives.
	Failed bool
	Error  string
}

// EndInvoke ends a run's span (nil: none): with err, when the caller saw
// no end of the run (it could not start it, or stopped waiting), or else
// with how the run ended, when ended is not nil (a caller that only starts
// the run passes nil).
func EndInvoke(span trace.Span, ended *Ended, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case ended != nil:
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", ended.Usage.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", ended.Usage.OutputTokens))
		if ended.Failed {
			span.SetStatus(codes.Error, ended.Error)
		}
	}
	span.End()
}

// OverdueTools adds n (1 when a call outlives its timeout, -1 when it
// returns at last) to the tool calls of agentName's toolName still running
// after their timeout.
func (t *Telemetry) OverdueTools(agentName, toolName string, n int64) {
	if t == nil || t.overdue == nil {
		return
	}
	// The handler's context may be over: the count is not about it.
	t.overdue.Add(context.Background(), n, metric.WithAttributes(attribute.String("gen_ai.agent.name", agentName), attribute.String("gen_ai.tool.name", toolName)))
}

// Ended counts the end of a run of agentName with status (its output's).
func (t *Telemetry) Ended(ctx context.Context, agentName, status string) {
	if t == nil || t.runs == nil {
		return
	}
	t.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("gen_ai.agent.name", agentName), attribute.String("calf.run.status", status)))
}

// MeasuresLag reports whether t records how long messages wait on the
// broker (Handled): a handler need not call it otherwise.
func (t *Telemetry) MeasuresLag() bool { return t != nil && t.lag != nil }

// Handled records how long msg waited on the broker, handled at now.
func (t *Telemetry) Handled(ctx context.Context, msg *calf.Message, now time.Time) {
	if t == nil || t.lag == nil || msg == nil || msg.Metadata.Time.IsZero() {
		return
	}
	t.lag.Record(ctx, now.Sub(msg.Metadata.Time).Seconds(), metric.WithAttributes(attribute.String("messaging.destination.name", msg.Channel)))
}

// Chat starts the span of a model call of agentName to modelName at step
// of a run, as a child of the run's span (msg's trace context). The span
// is nil when t records no spans; the caller ends it with EndChat.
func (t *Telemetry) Chat(ctx context.Context, msg *calf.Message, agentName, modelName string, step int) (context.Context, trace.Span) {
	if t == nil || t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(ParentOf(ctx, msg), "chat "+modelName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", modelName),
		attribute.String("gen_ai.agent.name", agentName),
		attribute.String("calf.run.id", msg.Metadata.RunID),
		attribute.Int("calf.step", step),
	))
}

// EndChat ends a model call's span (nil: none) and records its usage, its
// cost by prices and its duration took: the call answered resp (nil when
// it failed) or failed with err.
func (t *Telemetry) EndChat(ctx context.Context, span trace.Span, modelName string, resp *model.Response, err error, took time.Duration, prices model.Prices) {
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

// Tool starts the span of agentName's call callID of toolName, as a child
// of the run's span (msg's trace context). The span is nil when t records
// no spans; the caller ends it with EndTool.
func (t *Telemetry) Tool(ctx context.Context, msg *calf.Message, agentName, toolName, callID string) (context.Context, trace.Span) {
	if t == nil || t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(ParentOf(ctx, msg), "execute_tool "+toolName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", toolName),
		attribute.String("gen_ai.tool.call.id", callID),
		attribute.String("gen_ai.agent.name", agentName),
		attribute.String("calf.run.id", msg.Metadata.RunID),
	))
}

// EndTool ends a tool call's span (nil: none) and records its duration
// took. failure is the status of a call that did not succeed ("" for one
// that did), and detail what its span's status says of it.
func (t *Telemetry) EndTool(ctx context.Context, span trace.Span, toolName, failure, detail string, took time.Duration) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", toolName)}
	if failure != "" {
		attrs = append(attrs, attribute.String("error.type", "tool_"+failure))
	}
	if t.duration != nil {
		t.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attrs...))
	}
	if span == nil {
		return
	}
	if failure != "" {
		span.SetStatus(codes.Error, detail)
	}
	span.End()
}
