package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

func TestPermissionsDecide(t *testing.T) {
	kinds := []tool.Kind{tool.KindRead, tool.KindEdit, tool.KindExecute, tool.KindNetwork}
	for _, tt := range []struct {
		mode agent.PermissionMode
		want string // the decision for read, edit, execute, network: a (allow) or ? (ask)
	}{
		{agent.PermissionAsk, "????"},
		{"", "????"},
		{agent.PermissionAcceptReads, "a???"},
		{agent.PermissionAcceptEdits, "aa??"},
		{agent.PermissionBypass, "aaaa"},
	} {
		p := &agent.Permissions{Mode: tt.mode}
		var got strings.Builder
		for _, k := range kinds {
			switch d, _ := p.Decide("tool", k); d {
			case agent.PermissionAllow:
				got.WriteByte('a')
			case agent.PermissionAskUser:
				got.WriteByte('?')
			default:
				got.WriteByte('d')
			}
		}
		if got.String() != tt.want {
			t.Errorf("mode %q: %s, want %s", tt.mode, got.String(), tt.want)
		}
	}
	p := &agent.Permissions{Mode: agent.PermissionBypass, Allowed: []string{"bash|web_*"}, Disallowed: []string{"web_fetch"}}
	if d, why := p.Decide("web_fetch", tool.KindNetwork); d != agent.PermissionDeny || !strings.Contains(why, "web_fetch") {
		t.Errorf("disallowed over allowed and bypass: %s, %q", d, why)
	}
	p = &agent.Permissions{Mode: agent.PermissionAsk, Allowed: []string{"bash|web_*"}}
	for _, name := range []string{"bash", "web_search"} {
		if d, _ := p.Decide(name, tool.KindExecute); d != agent.PermissionAllow {
			t.Errorf("allowed %s in ask mode: %s", name, d)
		}
	}
	if d, _ := p.Decide("write_file", tool.KindEdit); d != agent.PermissionAskUser {
		t.Errorf("write_file in ask mode: %s", d)
	}
	for _, bad := range []agent.Permissions{{Mode: "sometimes"}, {Allowed: []string{"["}}} {
		if _, err := agent.New("a", modeltest.NewTestModel(), &agent.Options{Permissions: &bad}); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("permissions %+v: %v", bad, err)
		}
	}
}

// approvalAgent is W1's calculator with permissions, served on rt (e.rt
// when nil); add is an execute tool, peek a read tool. It returns the
// agent and the number of times add ran with its last arguments.
func approvalAgent(t *testing.T, e *env, rt *agent.Runtime, perms agent.Permissions, call string) (*agent.Agent[string], *atomic.Int64, *atomic.Value) {
	t.Helper()
	var runs atomic.Int64
	var last atomic.Value
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		runs.Add(1)
		last.Store(in)
		return in.A + in.B, nil
	}))
	peek := tool.Classify(tool.Must(tool.New("peek", "Read the display.", func(context.Context, addArgs) (string, error) {
		return "42", nil
	})), tool.KindRead)
	m := func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			if last.IsError {
				return modeltest.Text("error: " + last.Text()), nil
			}
			return modeltest.Text("The result is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", call, `{"a":2,"b":3}`)), nil
	}
	a := agent.Must(agent.New("calculator", modeltest.FunctionModel(m), &agent.Options{
		Tools: []tool.Tool{add, peek}, Permissions: &perms,
	}))
	if rt == nil {
		rt = e.rt
	}
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return a, &runs, &last
}

type runResult struct {
	out *agent.Output[string]
	err error
}

// startRun runs a in the background.
func startRun(t *testing.T, a *agent.Agent[string], rt *agent.Runtime, id string) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		out, err := a.Run(runCtx(t), rt, "add 2 and 3", &agent.RunOptions{RunID: id})
		done <- runResult{out, err}
	}()
	return done
}

// pending waits for the run's one pending approval request.
func pending(t *testing.T, rt *agent.Runtime, run string) approval.Approval {
	t.Helper()
	var as []approval.Approval
	testwait.ForErr(t, 10*time.Second, "the approval request of run "+run, func() (err error) {
		if as, err = approval.List(t.Context(), rt.Store(), run, approval.Pending); err != nil {
			return err
		}
		if len(as) != 1 {
			return fmt.Errorf("%d requests pending", len(as))
		}
		return nil
	})
	return as[0]
}

func wait(t *testing.T, done <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
		return runResult{}
	}
}

func TestApprovalApproved(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAcceptReads}, "add")
	done := startRun(t, a, e.rt, "r1")
	req := pending(t, e.rt, "r1")
	if req.ID != approval.ID("r1", "call_1") || req.ToolName != "add" || req.ToolKind != tool.KindExecute ||
		string(req.Arguments) != `{"a":2,"b":3}` || req.Digest == "" || !strings.Contains(req.Reason, "accept_reads") {
		t.Errorf("request %+v", req)
	}
	// Once every message is handled, the tool has had its chance to run.
	e.settle(t)
	if runs.Load() != 0 {
		t.Fatal("the tool ran before its approval")
	}
	ctx := t.Context()
	// Forged and mismatched answers are refused and change nothing.
	if _, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), approval.ID("r1", "call_9"), approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("answer to an unknown request: %v", err)
	}
	if _, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: "0000"}); !errors.Is(err, approval.ErrMismatch) {
		t.Errorf("answer for other arguments: %v", err)
	}
	if _, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Arguments: json.RawMessage(`[1]`), Digest: req.Digest}); err == nil {
		t.Error("edited arguments that are not an object were accepted")
	}
	if got, err := approval.Get(ctx, e.rt.Store(), req.ID); err != nil || got.Status != approval.Pending {
		t.Fatalf("after refused answers: %+v, %v", got, err)
	}
	answered, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Message: "go ahead", Digest: req.Digest})
	if err != nil || answered.Status != approval.Approved {
		t.Fatalf("approve: %+v, %v", answered, err)
	}
	r := wait(t, done)
	if r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("run: %+v, %v", r.out, r.err)
	}
	e.settle(t)
	if runs.Load() != 1 {
		t.Errorf("the tool ran %d times", runs.Load())
	}
	// A second answer is refused.
	if _, err := approval.Respond(ctx, e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: false, Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
		t.Errorf("second answer: %v", err)
	}
	e.settle(t)
	if runs.Load() != 1 {
		t.Errorf("after a second answer the tool ran %d times", runs.Load())
	}
}

func TestApprovalDeniedAndEdited(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, last := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")

	done := startRun(t, a, e.rt, "d1")
	req := pending(t, e.rt, "d1")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Message: "not today", Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || !strings.HasPrefix(r.out.Output, "error: ") || !strings.Contains(r.out.Output, "not today") || runs.Load() != 0 {
		t.Fatalf("denied run: %+v, %v; the tool ran %d times", r.out, r.err, runs.Load())
	}

	done = startRun(t, a, e.rt, "d2")
	req = pending(t, e.rt, "d2")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Arguments: json.RawMessage(`{"a":10,"b":10}`), Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r = wait(t, done)
	if r.err != nil || r.out.Output != "The result is 20" || last.Load().(addArgs) != (addArgs{A: 10, B: 10}) {
		t.Fatalf("edited run: %+v, %v, ran with %+v", r.out, r.err, last.Load())
	}
}

// Reads in accept_reads, allowed tools in ask mode and every tool in
// bypass run without asking; a disallowed tool is refused without asking.
func TestPermissionsWithoutAsking(t *testing.T) {
	for _, tt := range []struct {
		name   string
		perms  agent.Permissions
		call   string
		output string
	}{
		{"read in accept_reads", agent.Permissions{Mode: agent.PermissionAcceptReads}, "peek", "The result is 42"},
		{"allowed in ask", agent.Permissions{Mode: agent.PermissionAsk, Allowed: []string{"add"}}, "add", "The result is 5"},
		{"bypass", agent.Permissions{Mode: agent.PermissionBypass}, "add", "The result is 5"},
		{"disallowed", agent.Permissions{Mode: agent.PermissionBypass, Disallowed: []string{"a*"}}, "add", "error: the call was refused: the tool add is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, _, _ := approvalAgent(t, e, nil, tt.perms, tt.call)
			r := wait(t, startRun(t, a, e.rt, "p1"))
			if r.err != nil || r.out.Output != tt.output {
				t.Errorf("run: %+v, %v; want %q", r.out, r.err, tt.output)
			}
			if as, _ := approval.List(t.Context(), e.rt.Store(), "", ""); len(as) != 0 {
				t.Errorf("approval requests: %+v", as)
			}
		})
	}
}

// RunStream shows the request, then the answer, then the call's result.
func TestApprovalInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := approvalAgent(t, e, nil, agent.Permissions{}, "add")
	var kinds []string
	// The answer once the stream has shown the request: the request is
	// recorded before its event is sent, and an answer sent in between
	// would come first.
	shown := make(chan struct{})
	go func() {
		req := pending(t, e.rt, "s1")
		select {
		case <-shown:
		case <-t.Context().Done():
			return
		}
		if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
			t.Error(err)
		}
	}()
	for ev, err := range a.RunStream(runCtx(t), e.rt, "add", &agent.RunOptions{RunID: "s1"}) {
		if err != nil {
			t.Fatal(err)
		}
		k := string(ev.Kind)
		if ev.Kind == agent.EventApproval {
			k += ":" + string(ev.Approval.Status)
			if ev.Approval.Status == approval.Pending {
				close(shown)
			}
		}
		kinds = append(kinds, k)
	}
	got := strings.Join(kinds, " ")
	if !strings.Contains(got, "tool_call approval:pending approval:approved tool_result") {
		t.Errorf("stream: %s", got)
	}
}

// A run waiting for approval survives its worker: another worker, started
// after the first one stopped, carries out the answer.
func TestApprovalAcrossWorkers(t *testing.T) {
	e := newEnv(t, nil)
	first := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	a, runs, _ := approvalAgent(t, e, first, agent.Permissions{Mode: agent.PermissionAcceptEdits}, "add")
	done := startRun(t, a, e.rt, "w1")
	req := pending(t, e.rt, "w1")
	// The first worker stops: its subscriptions end with its client.
	if err := first.Client().Close(); err != nil {
		t.Fatal(err)
	}
	second := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	if err := a.Serve(t.Context(), second, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Client().Close() })
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || r.out.Output != "The result is 5" || runs.Load() != 1 {
		t.Fatalf("run: %+v, %v; the tool ran %d times", r.out, r.err, runs.Load())
	}
}

// A request no one answers within ApprovalTimeout is denied when its
// durable timer fires, with no sweep, and an answer after that is
// refused.
func TestApprovalExpires(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newClockEnv(t, clk)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk, ApprovalTimeout: time.Hour}, "add")
	done := startRun(t, a, e.rt, "x1")
	req := pending(t, e.rt, "x1")
	if !req.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("expires at %v", req.ExpiresAt)
	}
	// The request is recorded, then its timer started.
	testwait.ForErr(t, 10*time.Second, "the request's timer", func() error {
		ts, err := e.rt.Timers(t.Context(), "approval-expiry/")
		if err == nil && (len(ts) != 1 || !ts[0].Due.Equal(req.ExpiresAt)) {
			err = fmt.Errorf("timers %+v", ts)
		}
		return err
	})
	if n, err := approval.Expire(t.Context(), e.rt.Store(), e.rt.Client()); n != 0 || err != nil {
		t.Fatalf("before the hour: expired %d, %v", n, err)
	}
	clk.Add(time.Hour)
	r := wait(t, done)
	if r.err != nil || !strings.Contains(r.out.Output, "no one answered the approval request in time") || runs.Load() != 0 {
		t.Fatalf("expired run: %+v, %v; the tool ran %d times", r.out, r.err, runs.Load())
	}
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("an answer after expiry: %v", err)
	}
	if n, _ := approval.Expire(t.Context(), e.rt.Store(), e.rt.Client()); n != 0 {
		t.Errorf("a second sweep expired %d", n)
	}

	// An answer that comes after the expiry, whether or not the timer
	// has fired, is refused as expired.
	done = startRun(t, a, e.rt, "x2")
	req = pending(t, e.rt, "x2")
	clk.Add(2 * time.Hour)
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("a late answer: %v", err)
	}
	if r := wait(t, done); r.err != nil || !strings.Contains(r.out.Output, "in time") {
		t.Errorf("run x2: %+v, %v", r.out, r.err)
	}
}

// A Worker sweeps expired requests on its own.
func TestWorkerExpiresApprovals(t *testing.T) {
	e := newEnv(t, nil)
	w := agent.NewWorker(e.broker, e.store, &agent.WorkerOptions{ApprovalSweep: 20 * time.Millisecond})
	a, _, _ := approvalAgent(t, e, w.Runtime(), agent.Permissions{Mode: agent.PermissionAsk, ApprovalTimeout: 100 * time.Millisecond}, "add")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go w.Run(ctx)
	r := wait(t, startRun(t, a, e.rt, "y1"))
	if r.err != nil || !strings.Contains(r.out.Output, "in time") {
		t.Errorf("run: %+v, %v", r.out, r.err)
	}
}

// Approving a call for the session lets the tool's later calls in the
// session run without asking, until the permission is revoked.
func TestApprovalForSession(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")
	run := func(id string) <-chan runResult {
		done := make(chan runResult, 1)
		go func() {
			out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", &agent.RunOptions{RunID: id, SessionID: "sess"})
			done <- runResult{out, err}
		}()
		return done
	}
	done := run("f1")
	req := pending(t, e.rt, "f1")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, ForSession: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("first run: %+v, %v", r.out, r.err)
	}
	if s, err := session.Load(t.Context(), e.rt.Store(), "sess"); err != nil || len(s.AllowedTools) != 1 || s.AllowedTools[0] != "add" || len(s.Messages) == 0 {
		t.Fatalf("session %+v, %v", s, err)
	}
	// The next run of the session does not ask.
	if r := wait(t, run("f2")); r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("second run: %+v, %v", r.out, r.err)
	}
	if as, _ := approval.List(t.Context(), e.rt.Store(), "f2", ""); len(as) != 0 {
		t.Errorf("the second run asked: %+v", as)
	}
	// Revoked, it asks again.
	if err := session.RevokeTool(t.Context(), e.rt.Store(), "sess", "add"); err != nil {
		t.Fatal(err)
	}
	done = run("f3")
	req = pending(t, e.rt, "f3")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: false, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	if runs.Load() != 2 {
		t.Errorf("the tool ran %d times, want 2", runs.Load())
	}
	// A run in no session cannot allow for the session.
	done = startRun(t, a, e.rt, "f4")
	req = pending(t, e.rt, "f4")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, ForSession: true, Digest: req.Digest}); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("for the session without one: %v", err)
	}
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
}

// A run may bring its own permissions, which replace the agent's.
func TestRunPermissions(t *testing.T) {
	e := newEnv(t, nil)
	a, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionBypass}, "add")
	// The agent's bypass runs the call; the run's ask makes it wait.
	if r := wait(t, startRun(t, a, e.rt, "q1")); r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("under the agent's permissions: %+v, %v", r.out, r.err)
	}
	done := make(chan runResult, 1)
	go func() {
		out, err := a.Run(runCtx(t), e.rt, "add", &agent.RunOptions{RunID: "q2", Permissions: &agent.Permissions{Mode: agent.PermissionAsk}})
		done <- runResult{out, err}
	}()
	req := pending(t, e.rt, "q2")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || r.out.Output != "The result is 5" || runs.Load() != 2 {
		t.Fatalf("under the run's permissions: %+v, %v, %d tool runs", r.out, r.err, runs.Load())
	}
	// The run's own disallowed list refuses.
	out, err := a.Run(runCtx(t), e.rt, "add", &agent.RunOptions{Permissions: &agent.Permissions{Mode: agent.PermissionBypass, Disallowed: []string{"add"}}})
	if err != nil || !strings.Contains(out.Output, "refused") {
		t.Errorf("run disallowing add: %+v, %v", out, err)
	}
	// An agent without permissions takes no run permissions, and bad ones
	// are refused.
	plain := serve(t, e, agent.Must(agent.New("plain", modeltest.NewTestModel(modeltest.Text("hi")), nil)))
	if _, err := plain.Run(runCtx(t), e.rt, "x", &agent.RunOptions{Permissions: &agent.Permissions{}}); err == nil || !strings.Contains(err.Error(), "Options.Permissions") {
		t.Errorf("run permissions on an agent without: %v", err)
	}
	if _, err := a.Run(runCtx(t), e.rt, "x", &agent.RunOptions{Permissions: &agent.Permissions{Mode: "often"}}); err == nil {
		t.Error("a run with an unknown mode started")
	}
}

// A handoff target's approval request shows in the stream of the run the
// caller started, and answering it completes the chain.
func TestApprovalOfHandoffTargetInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	ops, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")
	transfer := tool.Must(agent.Handoff(ops, nil))
	front := serve(t, e, agent.Must(agent.New("front", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("h1", transfer.Definition().Name, `{"context":"add 2 and 3"}`)), nil
	}), &agent.Options{Tools: []tool.Tool{transfer}})))
	var kinds []string
	for ev, err := range front.RunStream(runCtx(t), e.rt, "please add", &agent.RunOptions{RunID: "h"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventApproval {
			kinds = append(kinds, string(ev.Kind)+":"+string(ev.Approval.Status)+"@"+ev.Agent)
			if ev.Approval.Status == approval.Pending {
				if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), ev.Approval.ID, approval.Answer{Approve: true, Digest: ev.Approval.Digest}); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		kinds = append(kinds, string(ev.Kind))
	}
	got := strings.Join(kinds, " ")
	if !strings.Contains(got, "handoff") || !strings.Contains(got, "approval:pending@calculator approval:approved@calculator tool_result") || runs.Load() != 1 {
		t.Errorf("stream: %s; the tool ran %d times", got, runs.Load())
	}
}

// A subagent's approval request shows in the stream of the run the caller
// started, and answering it there lets the subagent, then the parent,
// finish.
func TestApprovalOfSubagentInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	worker, runs, _ := approvalAgent(t, e, nil, agent.Permissions{Mode: agent.PermissionAsk}, "add")
	lead := serve(t, e, agent.Must(agent.New("lead", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("The worker says: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("s1", "calculator", `{"input":"add 2 and 3"}`)), nil
	}), &agent.Options{Tools: []tool.Tool{tool.Must(agent.AsTool(worker, nil))}})))
	var kinds []string
	var output string
	for ev, err := range lead.RunStream(runCtx(t), e.rt, "ask the worker", &agent.RunOptions{RunID: "top"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventApproval:
			kinds = append(kinds, "approval:"+string(ev.Approval.Status)+"@"+ev.Approval.RunID)
			if ev.Approval.Status == approval.Pending {
				if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), ev.Approval.ID, approval.Answer{Approve: true, Digest: ev.Approval.Digest}); err != nil {
					t.Fatal(err)
				}
			}
		case agent.EventOutput:
			var s string
			_ = json.Unmarshal(ev.Output.Content, &s)
			output = s
		}
	}
	child := agent.SubagentRunID("top", "s1")
	if got := strings.Join(kinds, " "); got != "approval:pending@"+child+" approval:approved@"+child {
		t.Errorf("approval events in the top-level stream: %q", got)
	}
	if output != "The worker says: The result is 5" || runs.Load() != 1 {
		t.Errorf("output %q; the tool ran %d times", output, runs.Load())
	}
	// The top-level run lists its subagent's requests.
	if as, err := approval.List(t.Context(), e.rt.Store(), "top", ""); err != nil || len(as) != 1 || as[0].RunID != child || as[0].Root == nil || as[0].Root.RunID != "top" {
		t.Errorf("requests of the top-level run: %+v, %v", as, err)
	}
}
