package agent_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
)

// An approval request's answer is a signal of its run: the run waits for
// the signal calf.approval.{call} (a waiter record, no goroutine), the
// answer records it and wakes the run, whose wait is then over; a caller
// cannot send that signal itself.
func TestApprovalAnswerIsASignal(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")
	done := startRun(t, a, e.rt, "r1")
	req := pending(t, e.rt, "r1")
	st := e.rt.Store()
	key, name := "agent/calculator/r1", signals.ApprovalName(req.ToolCallID)
	testwait.ForErr(t, 10*time.Second, "the run to wait for the answer's signal", func() error {
		_, err := st.Get(t.Context(), signals.KindWaiter, key+"/"+name)
		return err
	})

	// Forged: the signal is Calf's own.
	_, err := e.rt.Signal(t.Context(), agent.RunRef{Name: "calculator", RunID: "r1"}, name, req)
	if err == nil {
		t.Fatal("a caller sent the approval's signal")
	}
	if recs, err := st.List(t.Context(), signals.Kind, key+"/", "", 0); err != nil || len(recs) != 0 {
		t.Fatalf("signals recorded after a refused one: %d, %v", len(recs), err)
	}

	if _, err := approval.Respond(t.Context(), st, e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("run: %+v, %v", r.out, r.err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
	recs, err := st.List(t.Context(), signals.Kind, key+"/"+name+"/", "", 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("the answer's signals: %d, %v; want 1", len(recs), err)
	}
	if ans, err := approval.Decode(mustSignal(t, recs[0].Data).Value); err != nil || ans.Status != approval.Approved {
		t.Fatalf("the signal's value: %+v, %v", ans, err)
	}
	testwait.For(t, 10*time.Second, "the wait to be over", func() bool {
		_, err := st.Get(t.Context(), signals.KindWaiter, key+"/"+name)
		return errors.Is(err, store.ErrNotFound)
	})
	// Sent again, the answer is refused and no second signal is recorded.
	if _, err := approval.Respond(t.Context(), st, e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
		t.Fatalf("answered twice: %v", err)
	}
	if recs, _ := st.List(t.Context(), signals.Kind, key+"/"+name+"/", "", 0); len(recs) != 1 {
		t.Errorf("%d signals after the answer was sent again, want 1", len(recs))
	}
}

func mustSignal(t *testing.T, data []byte) *signals.Signal {
	t.Helper()
	var s signals.Signal
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
