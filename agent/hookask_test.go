package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/commandhook"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// askAgent is a calculator whose add tool (an execute tool) the hooks
// guard, with perms (none when nil); it returns the agent and how many
// times add ran.
func askAgent(t *testing.T, e *env, perms *agent.Permissions, hooks ...agent.Hook) (*agent.Agent[string], *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		runs.Add(1)
		return in.A + in.B, nil
	}))
	m := func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			if last.IsError {
				return modeltest.Text("error: " + last.Text()), nil
			}
			return modeltest.Text("The result is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	}
	a := agent.Must(agent.New("calculator", modeltest.FunctionModel(m), &agent.Options{
		Tools: []tool.Tool{add}, Permissions: perms, Hooks: hooks,
	}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return a, &runs
}

func askHook(reason string) agent.Hook {
	return agent.Hook{Name: "careful", Event: agent.HookPreToolUse, Matcher: "add",
		Func: func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{Action: agent.HookAsk, Reason: reason}, nil
		}}
}

// A pre_tool_use hook answering ask parks the call on approval, as the
// permissions do, even where they would let it run or where there are
// none: approving runs the tool, denying gives the model the denial.
func TestHookAsk(t *testing.T) {
	for _, tt := range []struct {
		name  string
		perms *agent.Permissions
	}{
		{"no permissions", nil},
		{"bypass", &agent.Permissions{Mode: agent.PermissionBypass}},
		{"allowed tool", &agent.Permissions{Allowed: []string{"add"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, runs := askAgent(t, e, tt.perms, askHook("adding is serious"))

			done := startRun(t, a, e.rt, "approved")
			req := pending(t, e.rt, "approved")
			if req.ToolName != "add" || !strings.Contains(req.Reason, "careful") || !strings.Contains(req.Reason, "adding is serious") {
				t.Errorf("request %+v", req)
			}
			if len(req.Hooks) != 1 || req.Hooks[0].Action != string(agent.HookAsk) {
				t.Errorf("request's hooks %+v", req.Hooks)
			}
			if runs.Load() != 0 {
				t.Fatal("the tool ran before the approval")
			}
			if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r := wait(t, done)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.out.Output != "The result is 5" || runs.Load() != 1 {
				t.Errorf("approved: output %q, %d runs", r.out.Output, runs.Load())
			}

			done = startRun(t, a, e.rt, "denied")
			req = pending(t, e.rt, "denied")
			if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Message: "not today", Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r = wait(t, done)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !strings.HasPrefix(r.out.Output, "error: ") || !strings.Contains(r.out.Output, "not today") || runs.Load() != 1 {
				t.Errorf("denied: output %q, %d runs", r.out.Output, runs.Load())
			}
		})
	}
}

// A later hook's denial, and the permissions' refusal, win over an ask.
func TestHookAskRefused(t *testing.T) {
	deny := agent.Hook{Name: "strict", Event: agent.HookPreToolUse,
		Func: func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{Action: agent.HookDeny, Reason: "no adding"}, nil
		}}
	for _, tt := range []struct {
		name  string
		perms *agent.Permissions
		hooks []agent.Hook
		want  string
	}{
		{"later denial", nil, []agent.Hook{askHook("sure?"), deny}, "denied by strict: no adding"},
		{"disallowed", &agent.Permissions{Mode: agent.PermissionBypass, Disallowed: []string{"add"}}, []agent.Hook{askHook("sure?")}, "the tool add is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, runs := askAgent(t, e, tt.perms, tt.hooks...)
			out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.Output, tt.want) || runs.Load() != 0 {
				t.Errorf("output %q, %d runs", out.Output, runs.Load())
			}
			if as, err := approval.List(t.Context(), e.rt.Store(), "", ""); err != nil || len(as) != 0 {
				t.Errorf("approval requests %+v, %v", as, err)
			}
		})
	}
}

// A command hook asks by printing {"action":"ask"}; a hook of another
// event than pre_tool_use cannot ask, and its ask denies.
func TestCommandHookAsk(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy")
	if err := os.WriteFile(p, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"action\":\"ask\",\"reason\":\"the policy asks\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := commandhook.New("policy", agent.HookPreToolUse, "add", []string{p}, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	a, runs := askAgent(t, e, nil, h)
	done := startRun(t, a, e.rt, "cmd")
	req := pending(t, e.rt, "cmd")
	if !strings.Contains(req.Reason, "the policy asks") {
		t.Errorf("reason %q", req.Reason)
	}
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil || r.out.Output != "The result is 5" || runs.Load() != 1 {
		t.Errorf("approved: %+v, %d runs", r, runs.Load())
	}

	post := agent.Hook{Name: "late", Event: agent.HookPostToolUse,
		Func: func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.HookDecision{Action: agent.HookAsk, Reason: "too late"}, nil
		}}
	e = newEnv(t, nil)
	a, _ = askAgent(t, e, nil, post)
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "the hook late failed") || !strings.Contains(out.Output, "cannot ask") {
		t.Errorf("post_tool_use ask: %q", out.Output)
	}
}
