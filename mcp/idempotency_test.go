package mcp_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store/sqlite"
)

// A client calls an agent's tool with the same arguments under one
// idempotency key (_meta "calf/idempotencyKey") five times, the last two
// after the server restarted on the same store: one run (one model
// call), the same answer; other arguments under the key are a tool
// error; once the window has passed, the key starts a new run.
func TestServerIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var offset atomic.Int64 // the clock, moved by hand
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var calls atomic.Int64
	ctx := runCtx(t)
	process := func() (*sdk.ClientSession, *agent.Runtime, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		pctx, cancel := context.WithCancel(ctx)
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: now, IdempotencyWindow: time.Hour})
		a := agent.Must(agent.New("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			n := calls.Add(1)
			return modeltest.Text(req.Messages[len(req.Messages)-1].Text() + " #" + string(rune('0'+n))), nil
		}), &agent.Options{Description: "Echoes."}))
		if err := a.Serve(pctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		s := mcp.NewServer(rt, nil)
		if err := s.AddRunner(runner.Agent(a)); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler(nil))
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs, rt, func() {
			_ = cs.Close()
			hs.Close()
			cancel()
			_ = c.Close()
			_ = b.Close()
			_ = st.Close()
		}
	}
	cs, rt, stop := process()
	defer func() { stop() }()
	call := func(prompt string, meta sdk.Meta) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"prompt": prompt}, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return text.String(), res.IsError
	}
	key := sdk.Meta{mcp.IdempotencyKeyMeta: "k-1"}
	var first string
	for i := range 5 {
		if i == 3 {
			stop()
			cs, rt, stop = process()
		}
		got, isErr := call("say hi", key)
		if isErr {
			t.Fatalf("call %d: %s", i+1, got)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Errorf("call %d answered %q, want %q", i+1, got, first)
		}
	}
	if n := calls.Load(); n != 1 || first != "say hi #1" {
		t.Errorf("%d model calls, answer %q; want 1 and %q", n, first, "say hi #1")
	}
	if recs, err := rt.Store().List(ctx, "run", "", "", 0); err != nil || len(recs) != 1 {
		t.Errorf("%d runs recorded (%v), want 1", len(recs), err)
	}
	if got, isErr := call("say bye", key); !isErr || !strings.Contains(got, "idempotency key") {
		t.Errorf("other arguments under the key: %q (isError %v), want a tool error", got, isErr)
	}
	if got, isErr := call("say hi", sdk.Meta{mcp.IdempotencyKeyMeta: 7}); !isErr || !strings.Contains(got, mcp.IdempotencyKeyMeta) {
		t.Errorf("a key that is not a string: %q (isError %v), want a tool error", got, isErr)
	}
	offset.Add(int64(2 * time.Hour)) // past the window
	if got, isErr := call("say hi", key); isErr || got != "say hi #2" {
		t.Errorf("the key after its window: %q (isError %v), want a new run's answer", got, isErr)
	}
}
