package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
)

// checkEnded checks that the request of run has ended with its run: not
// listed as pending, listed and stored as cancelled with why, and refused
// an answer with ErrRunEnded.
func checkEnded(t *testing.T, e *env, run, why string) {
	t.Helper()
	ctx := t.Context()
	id := approval.ID(run, "call_1")
	if as, err := approval.List(ctx, e.rt.Store(), run, approval.Pending); err != nil || len(as) != 0 {
		t.Errorf("pending requests of the ended run: %+v, %v", as, err)
	}
	if as, err := approval.List(ctx, e.rt.Store(), "", ""); err != nil || len(as) != 1 || as[0].Status != approval.Status("cancelled") || !strings.Contains(as[0].Message, why) {
		t.Errorf("requests: %+v, %v; want one cancelled, saying %q", as, err, why)
	}
	req, err := approval.Get(ctx, e.rt.Store(), id)
	if err != nil {
		t.Fatal(err)
	}
	a, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), id, approval.Answer{Approve: true, Digest: req.Digest})
	if !errors.Is(err, approval.ErrRunEnded) || !strings.Contains(err.Error(), why) {
		t.Errorf("answer to the request of an ended run: %v; want ErrRunEnded, saying %q", err, why)
	}
	if a == nil || a.Status != approval.Status("cancelled") {
		t.Errorf("answered: %+v", a)
	}
	if got, err := approval.Get(ctx, e.rt.Store(), id); err != nil || got.Status != approval.Status("cancelled") || !strings.Contains(got.Message, why) || got.AnsweredAt.IsZero() {
		t.Errorf("stored request: %+v, %v", got, err)
	}
	// Answered again: the same error.
	if _, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), id, approval.Answer{Approve: false, Digest: req.Digest}); !errors.Is(err, approval.ErrRunEnded) {
		t.Errorf("second answer: %v", err)
	}
}

// A cancelled run's approval request ends with it: it is recorded
// cancelled with the reason, and an answer is refused with ErrRunEnded.
func TestApprovalOfCancelledRunEnds(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAcceptEdits}, "add")
	id, err := a.Submit(t.Context(), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	pending(t, e.rt, id)
	if _, err := e.rt.Cancel(t.Context(), agent.RunRef{Name: a.Name(), RunID: id}, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	if got, err := approval.Get(t.Context(), e.rt.Store(), approval.ID(id, "call_1")); err != nil || got.Status != approval.Status("cancelled") || !strings.Contains(got.Message, "changed my mind") {
		t.Errorf("the request after Cancel: %+v, %v", got, err)
	}
	checkEnded(t, e, id, "changed my mind")
	e.settle(t)
	if runs.Load() != 0 {
		t.Errorf("the tool ran %d times", runs.Load())
	}
}

// A run whose caller stopped waiting (its timeout) is cancelled, and its
// request ends with it.
func TestApprovalOfAbandonedRunEnds(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAcceptEdits}, "add")
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, e.rt, "add 2 and 3", &agent.RunOptions{RunID: "t1"})
		done <- err
	}()
	pending(t, e.rt, "t1")
	cancel(context.DeadlineExceeded)
	if err := <-done; !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("run: %v", err)
	}
	checkEnded(t, e, "t1", "the caller stopped waiting")
	e.settle(t)
	if runs.Load() != 0 {
		t.Errorf("the tool ran %d times", runs.Load())
	}
}

// A request still stored as pending although its run has ended (a run
// that ended without ending its requests, as before requests ended with
// their runs) is listed as cancelled, and an answer is refused with
// ErrRunEnded.
func TestApprovalStoredPendingOfEndedRun(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAcceptEdits}, "add")
	id, err := a.Submit(t.Context(), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	pending(t, e.rt, id)
	e.settle(t)
	// The run fails behind the runtime's back, its request left pending.
	if _, err := store.Update(t.Context(), e.store, store.KindRun, id, func(data []byte, _ bool) ([]byte, error) {
		st, err := agent.DecodeRunState(data)
		if err != nil {
			return nil, err
		}
		st.Status, st.Error = agent.RunFailed, "the worker gave up"
		return json.Marshal(st)
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := approval.Get(t.Context(), e.rt.Store(), approval.ID(id, "call_1")); err != nil || got.Status != approval.Pending {
		t.Fatalf("stored request: %+v, %v", got, err)
	}
	checkEnded(t, e, id, "the worker gave up")
	e.settle(t)
	if runs.Load() != 0 {
		t.Errorf("the tool ran %d times", runs.Load())
	}
}
