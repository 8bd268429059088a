package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testwait"
)

// privateRedis starts a Redis server of the test's own on port, keeping
// nothing on disk, and returns a function that stops it (killed, as an
// outage would). It skips the test when redis-server is not installed,
// unless CALF_TEST_SERVICES is set.
func privateRedis(t *testing.T, port string) (stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	waitListening(t, "127.0.0.1:"+port)
	return stop
}

// calf serve on a store that goes down answers 503 with Retry-After, not
// 500, and 200 again once the store is back.
func TestServeStoreOutage(t *testing.T) {
	isolate(t)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	stop := privateRedis(t, port)
	srv, _ := newFakeServer(t)
	addr := freeAddr(t)
	serveInBackground(t, "serve", "--store", "redis://127.0.0.1:"+port, "--model", srv.URL()+"#m", "--addr", addr)
	waitListening(t, addr)

	get := func(path string) (int, string, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data), resp.Header.Get("Retry-After")
	}
	if status, body, _ := get("/v1/runs"); status != 200 {
		t.Fatalf("GET /v1/runs with the store up: %d %s", status, body)
	}

	stop()
	for _, path := range []string{"/v1/runs", "/v1/sessions", "/v1/deadletters"} {
		if status, body, retry := get(path); status != 503 || retry == "" || !strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("GET %s with the store down: %d, Retry-After %q, %s; want 503 unavailable with Retry-After", path, status, retry, body)
		}
	}

	privateRedis(t, port)
	// The store's client reconnects on its own: a request may still meet
	// a connection that the outage broke, and is answered 503 again.
	testwait.ForErr(t, 20*time.Second, "GET /v1/runs to answer 200 with the store back", func() error {
		status, body, retry := get("/v1/runs")
		if status == 200 && retry == "" {
			return nil
		}
		if status != 503 {
			t.Fatalf("GET /v1/runs with the store back: %d, Retry-After %q, %s; want 200", status, retry, body)
		}
		return fmt.Errorf("%d, Retry-After %q, %s", status, retry, body)
	})
}
