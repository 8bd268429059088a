package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/calf-go/calf/agent"
)

// telemetry is the OpenTelemetry setup of one calf command, from the
// standard OTEL_* environment variables: traces and metrics exported over
// OTLP/HTTP (otlp: OTEL_EXPORTER_OTLP_ENDPOINT and the rest of the
// exporter's variables), to standard error (console), or not at all
// (none, the default unless an OTLP endpoint is set). OTEL_SDK_DISABLED=true
// turns both off; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// process (default service name: calf).
type telemetry struct {
	opts     *agent.RuntimeOptions
	shutdown []func(context.Context) error
}

type telemetryKey struct{}

// runtimeOptions returns the runtime options of the command's telemetry
// in ctx (none: nil).
func runtimeOptions(ctx context.Context) *agent.RuntimeOptions {
	if t, ok := ctx.Value(telemetryKey{}).(*telemetry); ok && t.opts != nil {
		o := *t.opts
		return &o
	}
	return nil
}

// exporterChoice returns what OTEL_{signal}_EXPORTER asks for: otlp when
// unset and an OTLP endpoint is set, else none.
func exporterChoice(getenv func(string) string, signal string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(getenv("OTEL_" + signal + "_EXPORTER")))
	if v == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "" {
			return "otlp", nil
		}
		return "none", nil
	}
	switch v {
	case "otlp", "console", "none":
		return v, nil
	}
	return "", fmt.Errorf("OTEL_%s_EXPORTER=%s: calf exports otlp (over HTTP), console or none", signal, v)
}

// setupTelemetry configures the exporters the environment asks for.
func setupTelemetry(ctx context.Context, getenv func(string) string, console io.Writer) (*telemetry, error) {
	t := &telemetry{}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return t, nil
	}
	traces, err := exporterChoice(getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := exporterChoice(getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	if traces == "none" && metrics == "none" {
		return t, nil
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithAttributes(semconv.ServiceName(cmp.Or(getenv("OTEL_SERVICE_NAME"), "calf"))))
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	t.opts = &agent.RuntimeOptions{}
	switch traces {
	case "otlp", "console":
		var exp sdktrace.SpanExporter
		if traces == "otlp" {
			exp, err = otlptracehttp.New(ctx)
		} else {
			exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
		}
		if err != nil {
			return nil, fmt.Errorf("OpenTelemetry trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.opts.TracerProvider = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	switch metrics {
	case "otlp", "console":
		var exp sdkmetric.Exporter
		if metrics == "otlp" {
			exp, err = otlpmetrichttp.New(ctx)
		} else {
			exp, err = stdoutmetric.New(stdoutmetric.WithWriter(console))
		}
		if err != nil {
			return nil, fmt.Errorf("OpenTelemetry metric exporter: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		t.opts.MeterProvider = mp
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// close flushes and stops the exporters, for a few seconds at most.
func (t *telemetry) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, fn := range t.shutdown {
		errs = append(errs, fn(ctx))
	}
	return errors.Join(errs...)
}
