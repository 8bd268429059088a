package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The OTEL_* variables configure calf's exporters: console spans on
// standard error, OTLP over HTTP to an endpoint, and a clear error for an
// exporter calf does not have.
func TestOpenTelemetryExporters(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "hello")
	if got.code != exitOK {
		t.Fatalf("calf run: %d %s", got.code, got.stderr)
	}
	for _, w := range []string{`"Name":"invoke_agent assistant"`, `"Name":"chat openai:m"`, `"gen_ai.operation.name"`, `"service.name"`} {
		if !strings.Contains(strings.ReplaceAll(got.stderr, " ", ""), strings.ReplaceAll(w, " ", "")) {
			t.Errorf("the console spans lack %s:\n%s", w, got.stderr)
		}
	}

	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if len(body) > 0 && strings.Contains(r.Header.Get("Content-Type"), "protobuf") {
			paths[r.URL.Path]++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_METRICS_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	got = runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "hello")
	if got.code != exitOK {
		t.Fatalf("calf run with OTLP: %d %s", got.code, got.stderr)
	}
	mu.Lock()
	if paths["/v1/traces"] == 0 || paths["/v1/metrics"] == 0 {
		t.Errorf("the collector received %v", paths)
	}
	mu.Unlock()

	t.Setenv("OTEL_TRACES_EXPORTER", "jaeger")
	if got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "hello"); got.code != exitUsage || !strings.Contains(got.stderr, "otlp (over HTTP), console or none") {
		t.Errorf("an unknown exporter: %d %q", got.code, got.stderr)
	}
}
