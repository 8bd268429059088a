package schedule_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store/sqlite"
)

// A caller triggers a schedule five times under one idempotency key, the
// last two after the process restarted on the same store: one run, whose
// id each trigger returns; another key is another run; once the window
// has passed, the key fires again.
func TestTriggerIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	clk := start()
	var calls atomic.Int64
	process := func() (*agent.Agent[string], *agent.Runtime, *schedule.Scheduler, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		ctx, cancel := context.WithCancel(t.Context())
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: clk.Now, TimerPoll: 10 * time.Millisecond, IdempotencyWindow: time.Hour})
		a := agent.Must(agent.New("digest", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
			calls.Add(1)
			return modeltest.Text("the digest"), nil
		}), nil))
		if err := a.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		sc := schedule.New(rt, &schedule.Options{Now: clk.Now})
		if err := sc.Serve(ctx); err != nil {
			t.Fatal(err)
		}
		return a, rt, sc, func() { cancel(); _ = c.Close(); _ = b.Close(); _ = st.Close() }
	}
	ctx := t.Context()
	a, rt, sc, stop := process()
	if _, err := sc.Add(ctx, schedule.Spec{Name: "h", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Pause(ctx, "h"); err != nil { // only triggers fire
		t.Fatal(err)
	}
	var first string
	for i := range 5 {
		if i == 3 {
			stop()
			a, rt, sc, stop = process()
		}
		clk.Add(time.Second) // a trigger without the key would be a new run
		id, err := sc.TriggerWith(ctx, "h", &schedule.TriggerOptions{IdempotencyKey: "k-1"})
		if err != nil {
			t.Fatalf("trigger %d: %v", i+1, err)
		}
		out, err := a.Wait(ctx, rt, id)
		if err != nil || out.Output != "the digest" {
			t.Fatalf("trigger %d: run %s: %+v, %v", i+1, id, out, err)
		}
		if i == 0 {
			first = id
		} else if id != first {
			t.Errorf("trigger %d started run %s, want %s", i+1, id, first)
		}
	}
	defer func() { stop() }()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d model calls for five triggers under one key, want 1", n)
	}
	if got, err := sc.Get(ctx, "h"); err != nil || len(got.History) != 1 || got.History[0].RunID != first {
		t.Errorf("history %+v (%v), want the one firing of run %s", got, err, first)
	}
	other, err := sc.TriggerWith(ctx, "h", &schedule.TriggerOptions{IdempotencyKey: "k-2"})
	if err != nil || other == first {
		t.Fatalf("another key: run %s (%v), want a new run", other, err)
	}
	clk.Add(2 * time.Hour) // past the window
	again, err := sc.TriggerWith(ctx, "h", &schedule.TriggerOptions{IdempotencyKey: "k-1"})
	if err != nil || again == first {
		t.Fatalf("the key after its window: run %s (%v), want a new run", again, err)
	}
	testwait.For(t, 10*time.Second, "three runs", func() bool { return calls.Load() == 3 })
}
