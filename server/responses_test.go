package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/store/sqlite"
)

// A client sends the same response request under one Idempotency-Key
// five times, the last two after the server restarted on the same store:
// one run (one model call), the same response each time; another
// request under the key is refused with 409; once the window has passed,
// the key starts a new run.
func TestResponsesIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var offset atomic.Int64 // the clock, moved by hand
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var calls atomic.Int64
	process := func() (string, *agent.Runtime, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		ctx, cancel := context.WithCancel(t.Context())
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: now, IdempotencyWindow: time.Hour})
		a := agent.Must(agent.New("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			n := calls.Add(1)
			return modeltest.Text(req.Messages[len(req.Messages)-1].Text() + " #" + string(rune('0'+n))), nil
		}), &agent.Options{Description: "Echoes."}))
		if err := a.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		s, err := server.New(rt, []runner.Runner{runner.Agent(a)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		return hs.URL, rt, func() { hs.Close(); cancel(); _ = c.Close(); _ = b.Close(); _ = st.Close() }
	}
	url, rt, stop := process()
	defer func() { stop() }()
	key := map[string]string{server.IdempotencyHeader: "k-1"}
	send := func(body string) (int, string, string) {
		t.Helper()
		code, got, h := do(t, "POST", url+"/v1/responses", "", body, key)
		if code != 200 {
			return code, got, ""
		}
		var r struct {
			ID     string `json:"id"`
			Output []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil || len(r.Output) != 1 || len(r.Output[0].Content) != 1 {
			t.Fatalf("response %s (%v)", got, err)
		}
		if h.Get(server.RunHeader) == "" || r.ID != "resp_"+h.Get(server.RunHeader) {
			t.Errorf("response id %s, run %s", r.ID, h.Get(server.RunHeader))
		}
		return code, r.Output[0].Content[0].Text, r.ID
	}
	body := `{"model":"echo","input":"say hi"}`
	var first, firstID string
	for i := range 5 {
		if i == 3 {
			stop()
			url, rt, stop = process()
		}
		code, text, id := send(body)
		if code != 200 {
			t.Fatalf("send %d: %d %s", i+1, code, text)
		}
		if i == 0 {
			first, firstID = text, id
		} else if text != first || id != firstID {
			t.Errorf("send %d: %q in %s, want %q in %s", i+1, text, id, first, firstID)
		}
	}
	if n := calls.Load(); n != 1 || first != "say hi #1" {
		t.Errorf("%d model calls, answer %q; want 1 and %q", n, first, "say hi #1")
	}
	recs, err := rt.Store().List(t.Context(), "run", "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Errorf("%d runs recorded (%v), want 1", len(recs), err)
	}
	if code, got, _ := send(`{"model":"echo","input":"say bye"}`); code != http.StatusConflict || !strings.Contains(got, "idempotency_conflict") {
		t.Errorf("another request under the key: %d %s", code, got)
	}
	offset.Add(int64(2 * time.Hour)) // past the window
	if code, text, id := send(body); code != 200 || id == firstID || text != "say hi #2" {
		t.Errorf("the key after its window: %d %q in %s; want a new run", code, text, id)
	}
}
