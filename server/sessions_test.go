package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// turnView is a turn as GET /v1/sessions/{id} answers it.
type turnView struct {
	Run       string              `json:"run"`
	Status    string              `json:"status"`
	First     int                 `json:"first"`
	Count     int                 `json:"count"`
	Messages  []model.Message     `json:"messages"`
	Output    json.RawMessage     `json:"output"`
	Error     string              `json:"error"`
	Usage     model.Usage         `json:"usage"`
	Approvals []approval.Approval `json:"approvals"`
}

// sessionView is a session as GET /v1/sessions/{id} answers it.
type sessionView struct {
	Messages []model.Message `json:"messages"`
	Turns    []turnView      `json:"turns"`
}

// answerNext waits for the next pending approval request of run and
// answers it with ans.
func answerNext(ctx context.Context, t *testing.T, rt *agent.Runtime, run string, ans approval.Answer) {
	t.Helper()
	for {
		pending, err := approval.List(ctx, rt.Store(), run, approval.Pending)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) > 0 {
			ans.Digest = pending[0].Digest
			if _, err := approval.Respond(ctx, rt.Store(), rt.Client(), pending[0].ID, ans); err != nil {
				t.Fatal(err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s asked for no approval", run)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// GET /v1/sessions/{id} describes the session's runs as turns: the
// messages each added, its output, usage and approvals; a run that did
// not complete with the messages its record keeps. A run whose record is
// gone leaves its messages to no turn.
func TestSessionTurns(t *testing.T) {
	rt := testRuntime(t)
	a := approvalAgent(0)
	hs, _ := serveAgent(t, rt, a, true, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// run-1, approved; run-2, denied; run-3, approved, fails on its
	// budget of one model call.
	outs := map[string]*agent.Output[string]{}
	for i, ans := range []approval.Answer{{Approve: true}, {Approve: false, Message: "not now"}, {Approve: true}} {
		run := []string{"run-1", "run-2", "run-3"}[i]
		opts := &agent.RunOptions{SessionID: "s1", RunID: run}
		if i == 2 {
			opts.Budget = &agent.Budget{MaxModelCalls: 1, Fail: true}
		}
		done := make(chan error, 1)
		go func() {
			out, err := a.Run(ctx, rt, "add 2 and 3", opts)
			outs[run] = out
			done <- err
		}()
		answerNext(ctx, t, rt, run, ans)
		if err := <-done; (err != nil) != (i == 2) {
			t.Fatalf("%s: %v", run, err)
		}
	}
	for {
		info, err := session.LoadInfo(ctx, rt.Store(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		if info.Runs == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the session lists %d runs", info.Runs)
		case <-time.After(10 * time.Millisecond):
		}
	}

	get := func() sessionView {
		t.Helper()
		status, body, _ := do(t, "GET", hs.URL+"/v1/sessions/s1", "", "", nil)
		if status != 200 {
			t.Fatalf("GET /v1/sessions/s1: %d %s", status, body)
		}
		var v sessionView
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := get()
	if len(v.Messages) != 8 || len(v.Turns) != 3 {
		t.Fatalf("%d messages, turns %+v", len(v.Messages), v.Turns)
	}
	for i, want := range []struct {
		run, status  string
		first, count int
		approval     approval.Status
	}{
		{"run-1", "complete", 0, 4, approval.Approved},
		{"run-2", "complete", 4, 4, approval.Denied},
		{"run-3", "failed", 8, 0, approval.Approved},
	} {
		got := v.Turns[i]
		if got.Run != want.run || got.Status != want.status || got.First != want.first || got.Count != want.count {
			t.Errorf("turn %d: %+v, want %+v", i, got, want)
		}
		if len(got.Approvals) != 1 || got.Approvals[0].Status != want.approval || got.Approvals[0].ToolName != "add" || got.Approvals[0].ToolCallID != "call_1" {
			t.Errorf("turn %d's approvals: %+v", i, got.Approvals)
		}
		if out := outs[want.run]; out != nil && (got.Usage != out.Usage || got.Usage.InputTokens == 0) {
			t.Errorf("turn %d's usage %+v, the run's output %+v", i, got.Usage, out.Usage)
		}
	}
	if m := v.Messages[0]; m.Role != model.RoleUser || m.Text() != "add 2 and 3" {
		t.Errorf("the first turn's first message: %+v", m)
	}
	if got := v.Turns[0]; string(got.Output) != `"Done: 5"` || len(got.Messages) != 0 {
		t.Errorf("the first turn's output %s, messages %+v", got.Output, got.Messages)
	}
	if got := v.Turns[1].Approvals[0]; got.Message != "not now" {
		t.Errorf("the denial's message: %q", got.Message)
	}
	// The failed run added nothing to the session: its turn holds its
	// prompt, its tool call and the call's result.
	if got := v.Turns[2]; got.Error == "" || got.Usage.Requests != 1 || len(got.Messages) != 3 || got.Messages[0].Text() != "add 2 and 3" ||
		len(got.Messages[1].ToolCalls) != 1 || got.Messages[2].Text() != "5" {
		t.Errorf("the failed turn: %+v", got)
	}

	// The first run's record removed, as the retention sweep does: its
	// messages belong to no turn.
	if err := rt.Store().Delete(ctx, store.KindRun, "run-1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.LoadAgentRun(ctx, "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run-1 after its removal: %v", err)
	}
	v = get()
	if len(v.Turns) != 2 || v.Turns[0].Run != "run-2" || v.Turns[0].First != 4 || v.Turns[1].First != 8 {
		t.Errorf("turns without run-1's record: %+v", v.Turns)
	}
}
