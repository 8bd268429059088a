package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/store/sqlite"
)

// POST /v1/runs/{id}/signals/{name} sends a signal to a run that waits
// for it: 202, and the run goes on with the value; then 409 for the
// ended run, 404 for an unknown one, 400 for a bad name or body.
func TestSignalEndpoint(t *testing.T) {
	rt := testRuntime(t)
	var waited = make(chan struct{}, 4)
	c, err := agent.NewCustom("gate", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
		waited <- struct{}{}
		var v string
		if _, err := sc.WaitSignal("open", 0, &v); err != nil {
			return "", err
		}
		return "opened with " + v, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(rt, []runner.Runner{runner.Agent(c.Agent)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	if _, err := c.Submit(t.Context(), rt, "wait", &agent.RunOptions{RunID: "gate-1"}); err != nil {
		t.Fatal(err)
	}
	<-waited
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := post("/v1/runs/gate-1/signals/bad%20name", `"x"`); code != 400 {
		t.Errorf("a bad name: %d %s", code, body)
	}
	if code, body := post("/v1/runs/gate-1/signals/open", `not json`); code != 400 {
		t.Errorf("a body that is not JSON: %d %s", code, body)
	}
	code, body := post("/v1/runs/gate-1/signals/open", `"sesame"`)
	if code != http.StatusAccepted {
		t.Fatalf("signal: %d %s", code, body)
	}
	var sum runner.RunSummary
	if err := json.Unmarshal([]byte(body), &sum); err != nil || sum.ID != "gate-1" {
		t.Errorf("the answer %s: %v", body, err)
	}
	out, err := c.Wait(t.Context(), rt, "gate-1")
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "opened with sesame" {
		t.Errorf("output %q", out.Output)
	}
	testwait.For(t, 5*time.Second, "409 for the ended run", func() bool {
		code, _ := post("/v1/runs/gate-1/signals/open", `"again"`)
		return code == http.StatusConflict
	})
	if code, body := post("/v1/runs/nope-1/signals/open", ``); code != 404 {
		t.Errorf("an unknown run: %d %s", code, body)
	}
}

// The same chat completion under the same Idempotency-Key is one run,
// answered again; another request under the key is refused with 409.
func TestChatCompletionsIdempotencyKey(t *testing.T) {
	hs, _, rt := newServer(t, nil)
	body := `{"model":"echo","messages":[{"role":"user","content":"say hi"}]}`
	key := map[string]string{server.IdempotencyHeader: "k-1"}
	var first string
	for i := range 3 {
		code, got, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", body, key)
		if code != 200 {
			t.Fatalf("send %d: %d %s", i+1, code, got)
		}
		var resp struct {
			ID      string `json:"id"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(got), &resp); err != nil || len(resp.Choices) != 1 {
			t.Fatalf("send %d: %s (%v)", i+1, got, err)
		}
		if i == 0 {
			first = resp.Choices[0].Message.Content
		} else if c := resp.Choices[0].Message.Content; c != first {
			t.Errorf("send %d answered %q, want %q", i+1, c, first)
		}
	}
	recs, err := rt.Store().List(t.Context(), "run", "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Errorf("%d runs recorded (%v), want 1", len(recs), err)
	}
	code, got, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","messages":[{"role":"user","content":"say bye"}]}`, key)
	if code != http.StatusConflict || !strings.Contains(got, "idempotency_conflict") {
		t.Errorf("another request under the key: %d %s", code, got)
	}
}

// The same messages under one Idempotency-Key to two models are two
// requests: the second is refused.
func TestIdempotencyKeyNamesTheModel(t *testing.T) {
	rt := testRuntime(t)
	var rs []runner.Runner
	for _, name := range []string{"echo", "other"} {
		a := agent.Must(agent.New(name, &wordModel{answer: echoAnswer}, nil))
		if err := a.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, runner.Agent(a))
	}
	s, err := server.New(rt, rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	key := map[string]string{server.IdempotencyHeader: "k-2"}
	if code, got, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"echo","messages":[{"role":"user","content":"say hi"}]}`, key); code != 200 {
		t.Fatalf("first request: %d %s", code, got)
	}
	code, got, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"other","messages":[{"role":"user","content":"say hi"}]}`, key)
	if code != http.StatusConflict || !strings.Contains(got, "idempotency_conflict") {
		t.Errorf("the same messages to another model under the key: %d %s", code, got)
	}
}

// The same signal under the same Idempotency-Key, sent five times, the
// last two after the server restarted on the same store, is delivered
// once and answered again (202 each time); another signal under the key
// is refused with 409 (code idempotency_conflict).
func TestSignalEndpointIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	process := func() (string, *agent.Custom[struct{}, string], *agent.Runtime, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		cl := calf.NewClient(b, nil)
		ctx, cancel := context.WithCancel(t.Context())
		rt := agent.NewRuntime(cl, st, nil)
		c, err := agent.NewCustom("gate", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
			var a, b string
			if _, err := sc.WaitSignal("open", 0, &a); err != nil {
				return "", err
			}
			if _, err := sc.WaitSignal("open", 0, &b); err != nil {
				return "", err
			}
			return a + " " + b, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		s, err := server.New(rt, []runner.Runner{runner.Agent(c.Agent)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		return hs.URL, c, rt, func() { hs.Close(); cancel(); _ = cl.Close(); _ = b.Close(); _ = st.Close() }
	}
	url, c, rt, stop := process()
	defer func() { stop() }()
	if _, err := c.Submit(t.Context(), rt, "wait", &agent.RunOptions{RunID: "gate-1"}); err != nil {
		t.Fatal(err)
	}
	// The run waits before the restart: an in-memory broker's messages
	// in flight would be lost with it.
	var first []byte // the first wait's waiter
	testwait.For(t, 10*time.Second, "the run's wait", func() bool {
		recs, err := rt.Store().List(t.Context(), "signal_waiter", "", "", 0)
		if err == nil && len(recs) == 1 {
			first = recs[0].Data
		}
		return err == nil && len(recs) == 1
	})
	key := map[string]string{server.IdempotencyHeader: "k-1"}
	for i := range 5 {
		if i == 3 {
			// The signal sent runs the step again, in flight on the
			// in-memory broker: the restart waits for it to have taken
			// the signal and to wait again (this process does not
			// recover runs, as calf serve does).
			testwait.For(t, 10*time.Second, "the run to take the signal and wait again", func() bool {
				recs, err := rt.Store().List(t.Context(), "signal_waiter", "", "", 0)
				return err == nil && len(recs) == 1 && string(recs[0].Data) != string(first)
			})
			stop()
			url, c, rt, stop = process()
		}
		if code, body, _ := do(t, "POST", url+"/v1/runs/gate-1/signals/open", "", `"one"`, key); code != http.StatusAccepted {
			t.Fatalf("send %d: %d %s", i+1, code, body)
		}
	}
	recs, err := rt.Store().List(t.Context(), "signal", "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Errorf("%d signals recorded (%v), want 1", len(recs), err)
	}
	code, body, _ := do(t, "POST", url+"/v1/runs/gate-1/signals/open", "", `"two"`, key)
	if code != http.StatusConflict || !strings.Contains(body, "idempotency_conflict") {
		t.Errorf("another signal under the key: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", url+"/v1/runs/gate-1/signals/open", "", `"two"`, map[string]string{server.IdempotencyHeader: "k-2"}); code != http.StatusAccepted {
		t.Fatalf("another key: %d %s", code, body)
	}
	out, err := c.Wait(t.Context(), rt, "gate-1")
	if err != nil || out.Output != "one two" {
		t.Errorf("output %+v, %v; want %q", out, err, "one two")
	}
}
