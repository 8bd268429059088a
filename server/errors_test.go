package server_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// downStore is a store that can be taken down: while down, every call
// fails as a store adapter's does when its service cannot be reached.
type downStore struct {
	store.Store
	down atomic.Bool
}

var errStoreDown = calf.Unavailable(errors.New("store: dial tcp 127.0.0.1:5432: connection refused (taken down by the test)"))

func (s *downStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if s.down.Load() {
		return store.Record{}, errStoreDown
	}
	return s.Store.Get(ctx, kind, id)
}

func (s *downStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if s.down.Load() {
		return 0, errStoreDown
	}
	return s.Store.Put(ctx, kind, id, data, version)
}

func (s *downStore) Delete(ctx context.Context, kind, id string, version int64) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Delete(ctx, kind, id, version)
}

func (s *downStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.List(ctx, kind, prefix, after, limit)
}

// TestStoreOutage takes the store down under a server and reads 503 with
// Retry-After, not 500, from every endpoint that reads it, then 200 from
// the same requests once it is back.
func TestStoreOutage(t *testing.T) {
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := &downStore{Store: storemem.New()}
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	rt := agent.NewRuntime(c, st, nil)
	a := agent.Must(agent.New("echo", &wordModel{answer: echoAnswer}, nil))
	hs, _ := serveAgent(t, rt, a, false, &server.Options{Tokens: map[string]string{"tok-ann": "ann"}, RateLimit: -1})

	// A run, so that there is something to read once the store is back.
	chat := `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`
	status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", "tok-ann", chat, nil)
	if status != 200 {
		t.Fatalf("chat before the outage: %d %s", status, body)
	}
	run := h.Get(server.RunHeader)

	requests := []struct{ method, path, body string }{
		{"GET", "/v1/runs", ""},
		{"GET", "/v1/runs/" + run, ""},
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/sessions/s1", ""},
		{"GET", "/v1/deadletters", ""},
		{"GET", "/v1/schedules", ""},
		{"GET", "/v1/sessions/s1/wakeups", ""},
		// The session's owner is read before the run starts.
		{"POST", "/v1/chat/completions", chat},
	}
	send := func(method, path, body string) (int, string, string) {
		var hdr map[string]string
		if method == "POST" {
			hdr = map[string]string{server.SessionHeader: "s1"}
		}
		status, got, h := do(t, method, hs.URL+path, "tok-ann", body, hdr)
		return status, got, h.Get("Retry-After")
	}

	st.down.Store(true)
	for _, r := range requests {
		status, body, retry := send(r.method, r.path, r.body)
		if status != 503 || retry == "" || !strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("%s %s with the store down: %d, Retry-After %q, %s; want 503 unavailable with Retry-After", r.method, r.path, status, retry, body)
		}
	}
	spec := `{"name":"hourly","runner":"echo","cron":"@hourly"}`
	if status, body, retry := send("POST", "/v1/schedules", spec); status != 503 || retry == "" {
		t.Errorf("POST /v1/schedules with the store down: %d, Retry-After %q, %s; want 503", status, retry, body)
	}

	st.down.Store(false)
	for _, r := range requests {
		status, body, retry := send(r.method, r.path, r.body)
		if strings.HasPrefix(r.path, "/v1/sessions/s1") && r.method == "GET" {
			continue // read again below, once the chat made it
		}
		if status != 200 || retry != "" {
			t.Errorf("%s %s with the store back: %d, Retry-After %q, %s; want 200", r.method, r.path, status, retry, body)
		}
	}
	for _, path := range []string{"/v1/sessions/s1", "/v1/sessions/s1/wakeups"} {
		if status, body, _ := send("GET", path, ""); status != 200 {
			t.Errorf("GET %s with the store back: %d %s; want 200", path, status, body)
		}
	}
	if status, body, _ := send("POST", "/v1/schedules", spec); status != 201 {
		t.Errorf("POST /v1/schedules with the store back: %d %s; want 201", status, body)
	}
}

// TestNotFoundOfEachPackage: what does not exist is a 404 "not_found"
// whichever package says so (a session, a run, a dead letter, an approval
// request), and another user's is the same 404.
func TestNotFoundOfEachPackage(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{Tokens: map[string]string{"tok-ann": "ann"}})
	for _, path := range []string{
		"/v1/sessions/no-such-session",
		"/v1/runs/no-such-run",
		"/v1/deadletters/no-such-letter/replay",
		"/v1/schedules/no-such-schedule",
		"/v1/schedules/no-such-schedule/trigger",
		"/v1/sessions/no-such-session/wakeups",
		"/v1/no-such-endpoint",
	} {
		method := "GET"
		if strings.HasSuffix(path, "/replay") || strings.HasSuffix(path, "/trigger") {
			method = "POST"
		}
		status, body, _ := do(t, method, hs.URL+path, "tok-ann", "", nil)
		if status != 404 || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("%s %s: %d %s; want 404 not_found", method, path, status, body)
		}
	}
}
