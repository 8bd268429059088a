package agent_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store/sqlite"
)

// wakeModel schedules a follow-up when asked to, answers the follow-up
// turn, and counts the follow-up turns.
func wakeModel(followUps *atomic.Int64) model.Model {
	return modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == model.RoleTool:
			return modeltest.Text("scheduled: " + last.Text()), nil
		case strings.HasPrefix(last.Text(), agent.WakeUpNotePrefix):
			followUps.Add(1)
			return modeltest.Text("followed up on: " + strings.TrimPrefix(last.Text(), agent.WakeUpNotePrefix)), nil
		case last.Text() == "later":
			return modeltest.ToolCalls(modeltest.Call("w1", agent.WakeUpToolName, `{"after":"1h","note":"much later"}`)), nil
		default:
			return modeltest.ToolCalls(modeltest.Call("w1", agent.WakeUpToolName, `{"after":"800ms","note":"check the build"}`)), nil
		}
	})
}

// An agent schedules a follow-up in its session; its process stops and
// another starts on the same store; the follow-up turn runs once, at its
// time, in the same session. Another follow-up is listed and cancelled.
func TestWakeUpSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var followUps atomic.Int64
	process := func() (*agent.Runtime, *agent.Agent[string], func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{TimerPoll: 50 * time.Millisecond})
		a := agent.Must(agent.New("minder", wakeModel(&followUps), &agent.Options{WakeUps: &agent.WakeUps{Max: 2}}))
		if err := a.Serve(t.Context(), rt, nil); err != nil {
			t.Fatal(err)
		}
		return rt, a, func() { _ = c.Close(); _ = b.Close(); _ = st.Close() }
	}
	rt, a, stop := process()
	ctx := t.Context()
	out, err := a.Run(ctx, rt, "watch the build", &agent.RunOptions{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "Follow-up scheduled") {
		t.Fatalf("output %q", out.Output)
	}
	ws, err := rt.WakeUps(ctx, "minder", "s1")
	if err != nil || len(ws) != 1 || ws[0].Note != "check the build" {
		t.Fatalf("wake-ups %+v, %v", ws, err)
	}
	stop()

	rt, a, stop = process()
	defer stop()
	testwait.For(t, 20*time.Second, "the follow-up turn", func() bool {
		s, err := session.Load(ctx, rt.Store(), "s1")
		if err != nil {
			return false
		}
		for _, m := range s.Messages {
			if m.Text() == "followed up on: check the build" {
				return true
			}
		}
		return false
	})
	if ws, _ := rt.WakeUps(ctx, "minder", "s1"); len(ws) != 0 {
		t.Errorf("after it fired: %+v", ws)
	}
	// Another, an hour ahead: listed, then cancelled.
	if _, err := a.Run(ctx, rt, "later", &agent.RunOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	ws, err = rt.WakeUps(ctx, "minder", "s1")
	if err != nil || len(ws) != 1 || ws[0].Note != "much later" {
		t.Fatalf("wake-ups %+v, %v", ws, err)
	}
	if ok, err := rt.CancelWakeUp(ctx, ws[0].ID); !ok || err != nil {
		t.Fatalf("cancel: %v, %v", ok, err)
	}
	if ws, _ := rt.WakeUps(ctx, "minder", "s1"); len(ws) != 0 {
		t.Errorf("after the cancel: %+v", ws)
	}
	if n := followUps.Load(); n != 1 {
		t.Errorf("%d follow-up turns, want 1", n)
	}
}

// Without a session, a follow-up is refused: the model is told why.
func TestWakeUpNeedsSession(t *testing.T) {
	e := newEnv(t, nil)
	var followUps atomic.Int64
	a := agent.Must(agent.New("minder", wakeModel(&followUps), &agent.Options{WakeUps: &agent.WakeUps{}}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(runCtx(t), e.rt, "watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "needs a conversation") {
		t.Errorf("output %q, want the tool's refusal", out.Output)
	}
}
