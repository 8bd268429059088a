package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// The inspector's API: each user lists and reads only their own runs and
// dead letters, filters work, and a dead letter is replayed once.
func TestRunsAndDeadLetters(t *testing.T) {
	rt := testRuntime(t)
	a := agent.Must(agent.New("echo", &wordModel{answer: echoAnswer}, nil))
	hs, _ := serveAgent(t, rt, a, true, &server.Options{Tokens: map[string]string{"tok-ann-0123456789": "ann", "tok-bob-0123456789": "bob"}})
	const ann, bob = "tok-ann-0123456789", "tok-bob-0123456789"
	chat := `{"model":"echo","messages":[{"role":"user","content":"hello"}]}`
	var runs []string
	for range 2 {
		status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", ann, chat, nil)
		if status != 200 || h.Get(server.RunHeader) == "" {
			t.Fatalf("ann's run: %d %s", status, body)
		}
		runs = append(runs, h.Get(server.RunHeader))
	}
	list := func(token, query string) []runner.RunSummary {
		t.Helper()
		status, body, _ := do(t, "GET", hs.URL+"/v1/runs"+query, token, "", nil)
		if status != 200 {
			t.Fatalf("runs%s: %d %s", query, status, body)
		}
		var out struct {
			Runs []runner.RunSummary `json:"runs"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || out.Runs == nil {
			t.Fatalf("runs%s: %v %s", query, err, body)
		}
		return out.Runs
	}
	got := list(ann, "")
	if len(got) != 2 || got[0].ID != runs[1] || got[1].ID != runs[0] || got[0].Name != "echo" || got[0].Status != "complete" || got[0].Kind != "agent" {
		t.Errorf("ann's runs, newest first: %+v (started %v)", got, runs)
	}
	if got := list(ann, "?status=complete&agent=echo&limit=1"); len(got) != 1 || got[0].ID != runs[1] {
		t.Errorf("filtered and limited: %+v", got)
	}
	for _, q := range []string{"?status=failed", "?agent=other"} {
		if got := list(ann, q); len(got) != 0 {
			t.Errorf("runs%s: %+v", q, got)
		}
	}
	if got := list(bob, ""); len(got) != 0 {
		t.Errorf("bob sees ann's runs: %+v", got)
	}
	for _, q := range []string{"?status=weird", "?limit=0", "?limit=1000", "?limit=x"} {
		if status, body, _ := do(t, "GET", hs.URL+"/v1/runs"+q, ann, "", nil); status != 400 || !strings.Contains(body, `"error"`) {
			t.Errorf("runs%s: %d %s", q, status, body)
		}
	}
	if status, body, _ := do(t, "GET", hs.URL+"/v1/runs/"+runs[0], ann, "", nil); status != 200 || !strings.Contains(body, `"status":"complete"`) {
		t.Errorf("ann's run: %d %s", status, body)
	}
	for _, c := range []struct{ token, id string }{{bob, runs[0]}, {ann, "no-such-run"}} {
		if status, body, _ := do(t, "GET", hs.URL+"/v1/runs/"+c.id, c.token, "", nil); status != 404 {
			t.Errorf("run %s: %d %s", c.id, status, body)
		}
	}
	if status, body, _ := do(t, "GET", hs.URL+"/v1/runs", "", "", nil); status != 401 {
		t.Errorf("runs without a token: %d %s", status, body)
	}

	// A message of ann's first run parked, and recorded as the worker's
	// recorder does.
	ctx := t.Context()
	orig := &calf.Message{ID: "m-1", Channel: "calf.test.parked", Key: runs[0], Data: json.RawMessage(`{"n":1}`),
		Metadata: calf.Metadata{CorrelationID: runs[0], RunID: runs[0], Time: time.Now()}}
	dl := calf.NewDeadLetterMessage(orig, "g", errors.New("it broke"), 3, time.Now())
	if err := deadletter.Handler(rt.Store())(ctx, dl); err != nil {
		t.Fatal(err)
	}
	letters := func(token string) []deadletter.Record {
		t.Helper()
		status, body, _ := do(t, "GET", hs.URL+"/v1/deadletters", token, "", nil)
		if status != 200 {
			t.Fatalf("dead letters: %d %s", status, body)
		}
		var out struct {
			DeadLetters []deadletter.Record `json:"dead_letters"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out.DeadLetters
	}
	if got := letters(ann); len(got) != 1 || got[0].ID != dl.ID || got[0].Error != "it broke" || got[0].Attempts != 3 {
		t.Errorf("ann's dead letters: %+v", got)
	}
	if got := letters(bob); len(got) != 0 {
		t.Errorf("bob sees ann's dead letters: %+v", got)
	}
	replayed := make(chan *calf.Message, 2)
	if err := rt.Client().Handle(ctx, "calf.test.parked", func(_ context.Context, m *calf.Message) error {
		replayed <- m
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ token, id string }{{bob, dl.ID}, {ann, "no-such-letter"}, {ann, "..%2F..%2Fetc"}} {
		if status, body, _ := do(t, "POST", hs.URL+"/v1/deadletters/"+c.id+"/replay", c.token, "", nil); status != 404 {
			t.Errorf("replay %s as %s: %d %s", c.id, c.token, status, body)
		}
	}
	for i, want := range []bool{true, false} {
		status, body, _ := do(t, "POST", hs.URL+"/v1/deadletters/"+dl.ID+"/replay", ann, "", nil)
		if status != 200 || !strings.Contains(body, `"replay_id":"m-1.replay"`) || strings.Contains(body, `"published":true`) != want {
			t.Errorf("replay %d: %d %s", i+1, status, body)
		}
	}
	select {
	case m := <-replayed:
		if m.ID != "m-1.replay" || string(m.Data) != `{"n":1}` {
			t.Errorf("replayed %s %s", m.ID, m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replay was not published")
	}
	// Once the broker has handled every message, a second replay would
	// have come.
	if err := rt.Client().Broker().(*memory.Broker).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replayed:
		t.Errorf("replayed twice: %s", m.ID)
	default:
	}
}
